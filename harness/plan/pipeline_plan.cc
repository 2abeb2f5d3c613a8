// zb_plan's pipeline rows: per-GPU memory and traffic under micro-batch accumulation.
#include "harness/plan/pipeline_plan.h"

#include <algorithm>
#include <cstdio>

#include "harness/plan/pipeline_formula.h"

namespace zb {

PipelinePlanRow pipeline_plan_row(const Layout& l, Stage stage, int microbatches, int chunks, double bucket_elems) {
  PipelinePlanRow r;
  r.base = plan_row(l, stage);
  r.microbatches = microbatches;
  r.chunks = chunks;
  const int g = int(dtype_size(l.grad_dtype));
  const PlanRow& b = r.base;
  const double chunk = b.params_per_gpu / double(chunks);
  const double slot = bucket_elems > 0 ? std::min(bucket_elems, chunk) : chunk;
  r.slot_bytes = gradient_slots(stage) * double(g) * slot;
  r.bucketed = slot < chunk;
  r.grad_bytes = b.bytes.grads + r.slot_bytes;
  r.bytes_per_gpu = b.bytes_per_gpu + r.slot_bytes;
  r.gb_per_gpu = r.bytes_per_gpu / 1e9;
  // Dense and expert gradients are reduced in different groups, as in plan_row.
  const PipelineTraffic td = pipeline_traffic(stage, b.dense_shard, b.dense_params, g, microbatches);
  const PipelineTraffic te = pipeline_traffic(stage, b.expert_shard, b.expert_params, g, microbatches);
  r.elements_per_step = td.elements + te.elements;
  r.bytes_per_step = td.wire_bytes + te.wire_bytes;
  r.volume_psi = r.elements_per_step / b.params_per_gpu;
  return r;
}

std::string format_pipeline_table(const std::vector<PipelinePlanRow>& rows) {
  if (rows.empty()) return "";
  const PipelinePlanRow& f = rows.front();
  char line[256];
  std::snprintf(line, sizeof line,
                "\npipeline, dp=%lld: M=%d micro-batches per step, %d chunk(s) per GPU; slots hold one %s "
                "of gradients\n%-5s %11s %10s %9s %9s %8s %13s %11s\n",
                (long long)f.base.dp, f.microbatches, f.chunks, f.bucketed ? "bucket" : "chunk", "stage", "bytes/param", "GB/GPU", "grads",
                "slots", "Psi/step", "elements/step", "GB/step/GPU");
  std::string out = line;
  for (const PipelinePlanRow& r : rows) {
    std::snprintf(line, sizeof line, "%-5s %11.4f %10.3f %9.3f %9.3f %8.3f %13.4e %11.3f\n",
                  stage_name(r.base.stage), r.bytes_per_gpu / r.base.params_per_gpu, r.gb_per_gpu,
                  r.grad_bytes / 1e9, r.slot_bytes / 1e9, r.volume_psi, r.elements_per_step,
                  r.bytes_per_step / 1e9);
    out += line;
  }
  return out;
}

nlohmann::ordered_json pipeline_plan_json(const std::vector<PipelinePlanRow>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PipelinePlanRow& r : rows)
    out.push_back({{"stage", stage_name(r.base.stage)}, {"dp", r.base.dp}, {"microbatches", r.microbatches},
                   {"chunks", r.chunks}, {"params_per_gpu", r.base.params_per_gpu},
                   {"bytes_per_param", r.bytes_per_gpu / r.base.params_per_gpu}, {"gb_per_gpu", r.gb_per_gpu},
                   {"grads_bytes", r.grad_bytes}, {"slot_bytes", r.slot_bytes}, {"volume_psi", r.volume_psi},
                   {"elements_per_step", r.elements_per_step}, {"bytes_per_step", r.bytes_per_step}});
  return out;
}

}  // namespace zb
