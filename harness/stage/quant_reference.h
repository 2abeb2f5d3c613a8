// The check of a quantized step. Its reference is the same training run unquantized on one
// process; what the check holds the final state to is the interval of states that every run
// quantizing as the step does can reach, built from the kernels' proved error bounds
// (kernels/quantize/quantize.h) and carried through the gradient and the optimizer element by
// element. An element outside its interval is `wrong`: no quantization within the bounds gives it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "harness/core/status.h"
#include "harness/stage/reference.h"
#include "harness/stage/stage_config.h"

namespace zb {

// The ranks the step ran on: N = S x R, nodes of S consecutive ranks.
struct QuantShape {
  int ranks = 1, ranks_per_node = 1, nodes = 1;
};

// The unquantized reference and, per element, the master weights' interval [lo, hi] (the BF16
// weights' is its rounding).
struct BoundedState {
  CheckState ref;
  std::vector<float> master_lo, master_hi;
};

// Replays `steps` steps for `segments` (a stage's check segments: one per unit, this rank's
// block of it, in unit order) as `config` quantizes them. FP8 scales a layer by the amax of all
// its blocks, so the bound of that amax is combined over the ranks with `max_over_ranks` (called
// once a step, on every rank; unused for the other formats).
//
// What the interval covers, per step: the weights gathered within the block (or tensor) error
// bound of their own bound's amax; each rank's synthetic gradient at every BF16 weight in that
// range (it depends on the weight's low three bits, kernels/synthetic.h); qgZ's quantization,
// sums and requantization with the amaxes of those gradients; and the optimizer (FP32 math
// monotone in each input, so its extremes lie at the corners of the inputs' box), each bound
// widened by two FP32 ulps for a GPU's fused multiply-adds. Runs on `threads` CPU threads (0:
// all); the result does not depend on how many.
Status bounded_reference(const StageConfig& config, const QuantShape& shape, int64_t steps,
                         const std::vector<Segment>& segments,
                         const std::function<Status(std::vector<double>*)>& max_over_ranks, int threads,
                         BoundedState* out);

// The final state against the bounds: elements whose BF16 weight or FP32 master lies outside,
// and the error of the final weights against the unquantized reference as sums a caller
// combines over ranks. The weights are the FP32 master's: the BF16 copy is their rounding, whose
// step (2^-8 near 1) would stand in for any error smaller than it.
struct BoundCheck {
  uint64_t outside = 0, count = 0;
  double error_max = 0, error_sq = 0, ref_sq = 0;  // |master - reference|, squared, reference squared
  double bound_max = 0;                            // the largest distance the interval allows
};
BoundCheck check_bounded(const CheckState& got, const BoundedState& want);

}  // namespace zb
