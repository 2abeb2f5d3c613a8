// The check: the parts of the flat vector a rank compares, what it compares (its BF16 weights
// and FP32 master), and the single-process reference they are compared with.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/compute/compute.h"
#include "harness/core/bf16.h"
#include "harness/core/device.h"
#include "harness/stage/stage_config.h"

namespace zb {

// A run of the flat vector: `count` elements from flat index `flat`, stored from `local` in
// this rank's weight buffer and from `local_master` in its FP32 master buffer.
struct Segment {
  uint64_t flat, local, local_master, count;
};

// What the check compares: the BF16 weights, and the FP32 master weights, which show an
// update too small to move a BF16 weight (Adam's steps are ~lr, below BF16's resolution).
struct CheckState {
  std::vector<Bf16> weights;
  std::vector<float> master;
};

// The single-process reference: replays `steps` steps for `segments` of the flat vector,
// summing each step's gradients over all `ranks` itself, and returns the final state.
Status reference_state(const StageConfig& config, int ranks, int64_t steps,
                       const std::vector<Segment>& segments, Compute& compute, CheckState* out);
// Elements whose weight or master differs from the reference in any bit.
uint64_t count_mismatches(const CheckState& got, const CheckState& want);
// What a rank holds of `segments`, from its BF16 weight and FP32 master buffers (wherever
// they live), for count_mismatches.
Status copy_state_to_host(const Buffer& weights, const Buffer& master, const std::vector<Segment>& segments,
                          CheckState* out);

}  // namespace zb
