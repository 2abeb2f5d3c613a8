// Pipeline ZeRO formulas: what micro-batch accumulation does to each stage's traffic and memory.
#include "harness/plan/pipeline_formula.h"

#include "harness/plan/state_formula.h"

namespace zb {

bool is_pipeline_stage(Stage stage) { return !stage_model(stage).shards_weights(); }

const std::vector<Stage>& pipeline_stages() {
  static const std::vector<Stage> stages = [] {
    std::vector<Stage> out;
    for (Stage s : all_stages())
      if (is_pipeline_stage(s)) out.push_back(s);
    return out;
  }();
  return stages;
}

int reduce_passes(Stage stage, int microbatches) {
  return stage_model(stage).shards_grads() ? microbatches : 1;
}

int gradient_slots(Stage stage) { return stage_model(stage).shards_grads() ? 2 : 0; }

PipelineTraffic pipeline_traffic(Stage stage, int64_t n, double psi, int grad_bytes,
                                 int microbatches) {
  const StageModel& m = stage_model(stage);
  const double passes = reduce_passes(stage, microbatches);
  PipelineTraffic t;
  t.all_reduce_elements = m.all_reduces() * passes * psi;
  t.reduce_scatter_elements = m.reduce_scatters() * passes * psi;
  t.all_gather_elements = m.all_gathers() * psi;  // the updated weights, once per step
  t.elements = 2 * t.all_reduce_elements + t.reduce_scatter_elements + t.all_gather_elements;
  const double ring = double(n - 1) / double(n), g = double(grad_bytes);
  t.wire_bytes = ring * (2 * t.all_reduce_elements * g + t.reduce_scatter_elements * g +
                         t.all_gather_elements * kWeightBytes);
  return t;
}

double pipeline_grad_bytes_per_param(Stage stage, int grad_bytes, int64_t n, double slot_elems,
                                     double psi) {
  const double g = double(grad_bytes);
  const double kept = stage_model(stage).shards_grads() ? g / double(n) : g;
  return kept + gradient_slots(stage) * slot_elems * g / psi;
}

}  // namespace zb
