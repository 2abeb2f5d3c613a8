// Recording a step once and replaying it against a sweep.
#include "harness/predict/replay.h"

#include "harness/predict/link_rate.h"
#include "harness/predict/pricing.h"
#include "harness/predict/record.h"

namespace zb {

Status record_zero_step(const ModelSpec& model, const ZeroConfig& config, const ComputeSpec& compute,
                        const Topology& topo, RecordedStep* out) {
  out->compute = compute;
  out->topo = topo;
  return record_zero_schedule(model, config, topo, 2, &out->log, &out->traffic);
}

Status record_pipeline_step(const ModelSpec& model, const PipelineConfig& config, const ComputeSpec& compute,
                            const Topology& topo, RecordedStep* out) {
  out->compute = compute;
  out->topo = topo;
  return record_pipeline_schedule(model, config, compute, topo, 2, &out->log, &out->traffic);
}

StepPrediction replay(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                      Status* missing, std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline) {
  const Pricer pricer(sweep, tiers, step.topo, inter_gbps);
  auto compute_seconds = [&](const ScheduleOp& op) {
    // What --compute puts in the step; the synthetic backward and the optimizer's update
    // are not modelled.
    if (op.what == "forward") return step.compute.seconds;
    if (op.what == "backward") return 2 * step.compute.seconds;
    return op.what == "idle" ? op.seconds : 0.0;
  };
  return predict_step(step.log.ops(), compute_seconds, [&](const CollRecord& c) { return pricer.cost(c, missing); },
                      spans, timeline);
}

double step_required_link_gbps(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double limit,
                               Status* missing) {
  if (step.topo.nodes < 2 || !tiers.inter.ok()) return NAN;
  return required_link_gbps([&](double gbps) { return replay(step, sweep, tiers, gbps, missing); }, limit);
}

}  // namespace zb
