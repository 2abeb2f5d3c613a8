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

namespace {

// A quantization kernel's seconds at its measured rate; a step logged with kernels but given no
// rates is refused, never priced as free.
double kernel_seconds(const RecordedStep& step, const ScheduleOp& op, Status* missing) {
  if (step.kernels) return step.kernels->seconds(op, missing);
  if (*missing) *missing = Status::error("a quantized step's kernels need their rates (zb_predict --kernels)");
  return 0;
}

}  // namespace

StepPrediction replay(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                      Status* missing, std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline) {
  const Pricer pricer(sweep, tiers, step.topo, inter_gbps);
  auto compute_seconds = [&](const ScheduleOp& op) {
    // What --compute puts in the step; the synthetic backward and the optimizer's update
    // are not modelled.
    if (op.elements > 0) return kernel_seconds(step, op, missing);
    if (op.what == "forward") return step.compute.seconds;
    if (op.what == "backward") return 2 * step.compute.seconds;
    return op.what == "idle" ? op.seconds : 0.0;
  };
  return predict_step(step.log.ops(), compute_seconds, [&](const CollRecord& c) { return pricer.cost(c, missing); },
                      spans, timeline);
}

double quantize_seconds(const RecordedStep& step, Status* missing) {
  const std::vector<ScheduleOp>& ops = step.log.ops();
  size_t last = 0;  // the last step's marker
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == ScheduleOp::Kind::step) last = i;
  double seconds = 0;
  for (size_t i = last; i < ops.size(); ++i)
    if (ops[i].kind == ScheduleOp::Kind::compute && ops[i].elements > 0) seconds += kernel_seconds(step, ops[i], missing);
  return seconds;
}

double step_required_link_gbps(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double limit,
                               Status* missing) {
  if (step.topo.nodes < 2 || !tiers.can_price_inter()) return NAN;
  return required_link_gbps([&](double gbps) { return replay(step, sweep, tiers, gbps, missing); }, limit);
}

double quantized_beats_below_gbps(const RecordedStep& quantized, const RecordedStep& plain, const Sweep& sweep,
                                  const Tiers& tiers, Status* missing) {
  if (quantized.topo.nodes < 2 || !tiers.can_price_inter()) return NAN;
  return crossing_link_gbps([&](double gbps) {
    return replay(quantized, sweep, tiers, gbps, missing).step_s - replay(plain, sweep, tiers, gbps, missing).step_s;
  });
}

}  // namespace zb
