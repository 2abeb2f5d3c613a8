// Pipeline ZeRO formulas: memory and traffic of dp, z1 and z2 when every step accumulates
// gradients over M micro-batches, from the stage table; the one copy zb_pipeline and zb_plan use.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/stage/stage.h"

namespace zb {

// The stages that run under a pipeline schedule: those that keep the weights whole (dp, z1,
// z2). Sharded weights would be gathered for every micro-batch's forward and backward.
bool is_pipeline_stage(Stage stage);
const std::vector<Stage>& pipeline_stages();

// Gradient reductions per step, in passes over the vector. Whole gradients accumulate
// locally and are reduced once, after each chunk's last micro-batch (dp, Megatron's
// distributed optimizer); a rank that keeps only its shard cannot hold a micro-batch's
// unreduced gradient, so it reduces after every micro-batch's backward (pipeline ZeRO-2).
int reduce_passes(Stage stage, int microbatches);

// Transient gradient slots of one bucket (at most a chunk) each: two where gradients are
// sharded (one filling while the other's reduce-scatter is in flight), none where they
// accumulate in place.
int gradient_slots(Stage stage);

// One step of a pipeline stage of psi parameters replicated over n ranks, counted as
// state_formula.h's StepTraffic: full-buffer elements per collective kind, the volume
// convention's elements (2 psi, 2 psi, (M + 1) psi) and one rank's ideal ring wire bytes.
struct PipelineTraffic {
  double all_reduce_elements = 0, reduce_scatter_elements = 0, all_gather_elements = 0;
  double elements = 0, wire_bytes = 0;
};
PipelineTraffic pipeline_traffic(Stage stage, int64_t n, double psi, int grad_bytes,
                                 int microbatches);

// Gradient memory per parameter: the accumulation buffer (g) where gradients are whole, else
// the own shard (g / n) plus the slots of slot_elems gradients each, spread over psi.
double pipeline_grad_bytes_per_param(Stage stage, int grad_bytes, int64_t n, double slot_elems,
                                     double psi);

}  // namespace zb
