// zb_plan's pipeline rows: memory and traffic per GPU of dp, z1 and pipeline ZeRO-2 when a step
// accumulates M micro-batches over C chunks per GPU, from the pipeline formulas, without running.
#pragma once

#include <string>
#include <vector>

#include "harness/plan/plan.h"

namespace zb {

struct PipelinePlanRow {
  PlanRow base;                  // the stage's resident state and sharding for this layout
  int microbatches = 1, chunks = 1;
  bool bucketed = false;         // a slot is a bucket smaller than a chunk
  double grad_bytes = 0;         // per GPU: accumulation buffer, or own shard plus the slots
  double slot_bytes = 0;         // the slots alone: two buckets of gradients (z2), transient
  double bytes_per_gpu = 0, gb_per_gpu = 0;  // resident state plus slots
  double volume_psi = 0, elements_per_step = 0, bytes_per_step = 0;  // DP collectives only
};

// Slots hold one gradient bucket: `bucket_elems` parameters, or a whole chunk of this GPU's
// (Ψ per GPU / chunks) when that is smaller or bucket_elems is 0, as zb_pipeline sizes them
// (its buckets never span two chunks).
PipelinePlanRow pipeline_plan_row(const Layout& layout, Stage stage, int microbatches, int chunks,
                                  double bucket_elems = 0);

std::string format_pipeline_table(const std::vector<PipelinePlanRow>& rows);
// The rows as a JSON array: plan_json's document holds it as its "pipeline" member.
nlohmann::ordered_json pipeline_plan_json(const std::vector<PipelinePlanRow>& rows);

}  // namespace zb
