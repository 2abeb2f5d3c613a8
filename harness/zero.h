// ZeRO: the resident state and one training step of each stage (dp, z1, z2, z3), issuing
// the real collectives on real buffers, asynchronously on the communicator's stream.
#pragma once

#include <memory>
#include <vector>

#include "harness/comm.h"
#include "harness/compute.h"
#include "harness/memory_tracker.h"
#include "harness/model.h"
#include "harness/state_formula.h"

namespace zb {

struct ZeroConfig {
  Stage stage = Stage::dp;
  OptimizerConfig optimizer;
  DType grad_dtype = DType::bf16;
  uint64_t bucket_elems = 25ull << 20;  // gradient bucket, in parameters
  bool corrupt = false;  // test only: perturb one gradient element of the first step
};

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

class ZeroStep {
 public:
  // Allocates the stage's resident state through the tracker, measures it independently
  // (resident-set growth or cudaMemGetInfo), then allocates transient buffers and
  // initialises the weights identically on every rank.
  static Status create(Communicator& comm, Compute& compute, const ModelSpec& model,
                       const ZeroConfig& config, std::unique_ptr<ZeroStep>* out);

  Status step();  // one training step: forward, backward, optimizer
  int64_t steps_done() const { return step_; }

  const FlatLayout& layout() const { return layout_; }
  const MemoryTracker& tracker() const { return tracker_; }
  int64_t measured_state_bytes() const { return measured_state_bytes_; }

  // The parts of the final weights this rank verifies: its own block of every unit for the
  // sharded stages, a 1/N slice for dp, so the ranks together cover every element once.
  std::vector<Segment> check_segments() const;
  Status state_to_host(const std::vector<Segment>& segments, CheckState* out) const;

 private:
  ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config, FlatLayout layout);
  Status allocate_state();
  Status init_weights();
  Status backward_into(const Unit& u, const Bf16* weights, void* grad);
  Status step_dp();
  Status step_z1_z2();
  Status step_z3();
  Status update_units();  // optimizer on this rank's block of every unit (z1, z2)
  Status gather_units();  // all-gather of the updated BF16 weights (z1, z2)
  char* grad_at(void* base, uint64_t elems) const;

  Communicator& comm_;
  Compute& compute_;
  ZeroConfig config_;
  FlatLayout layout_;
  MemoryTracker tracker_;
  int rank_, ranks_;
  int64_t step_ = 0, measured_state_bytes_ = 0;
  uint64_t max_unit_ = 0;
  Buffer weights_, grads_, master_, m_, v_;
  Buffer slot_[2], gathered_[2];  // transient: bucket/layer gradients, gathered layers
  Event slot_free_[2];
};

// The single-process reference: replays `steps` steps for `segments` of the flat vector,
// summing each step's gradients over all `ranks` itself, and returns the final state.
Status reference_state(const ZeroConfig& config, int ranks, int64_t steps,
                       const std::vector<Segment>& segments, Compute& compute, CheckState* out);
// Elements whose weight or master differs from the reference in any bit.
uint64_t count_mismatches(const CheckState& got, const CheckState& want);

}  // namespace zb
