// zb_plan's pipeline rows: memory and traffic per GPU of dp, z1 and pipeline ZeRO-2 when a step
// accumulates M micro-batches over C chunks per GPU, from the pipeline formulas, without running.
#pragma once

#include <string>
#include <vector>

#include "harness/zero/plan.h"

namespace zb {

struct PipelinePlanRow {
  PlanRow base;                  // the stage's resident state and sharding for this layout
  int microbatches = 1, chunks = 1;
  double grad_bytes = 0;         // per GPU: accumulation buffer, or own shard plus the slots
  double slot_bytes = 0;         // the slots alone: two chunks of gradients (z2), transient
  double bytes_per_gpu = 0, gb_per_gpu = 0;  // resident state plus slots
  double volume_psi = 0, elements_per_step = 0, bytes_per_step = 0;  // DP collectives only
};

// Slots hold one chunk of this GPU's parameters: Ψ per GPU / chunks.
PipelinePlanRow pipeline_plan_row(const Layout& layout, Stage stage, int microbatches, int chunks);

std::string format_pipeline_table(const std::vector<PipelinePlanRow>& rows);
// `"pipeline": [...]`, a member for plan_json's object.
std::string pipeline_plan_json_member(const std::vector<PipelinePlanRow>& rows);

}  // namespace zb
