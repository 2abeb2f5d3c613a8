// Recording a step once and replaying it against a sweep.
#include "harness/predict/replay.h"

#include <algorithm>
#include <cmath>

#include "harness/core/stats.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/pricing.h"
#include "harness/predict/record.h"

namespace zb {

Status record_zero_step(const ModelSpec& model, const ZeroConfig& config, const ComputeSpec& compute,
                        const Topology& topo, RecordedStep* out) {
  out->compute = compute;
  out->topo = topo;
  out->grad_dtype = dtype_name(config.grad_dtype);
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

double crowded_kernel_seconds(double alone_s, double together_s, double layer_s, bool layer_busy, int ranks,
                              int cores) {
  if (!(together_s > alone_s) || ranks < 2) return alone_s;
  if (cores <= 0) return together_s;
  const int free = ranks_outnumber_cores(cores, ranks) ? cores : 1;  // kernels at once that still run alone
  const double slower = together_s / alone_s - 1;
  double s = alone_s;
  for (int iter = 0; iter < 64; ++iter) {
    const double u = std::clamp((s + (layer_busy ? layer_s : 0)) / (s + layer_s), 0.0, 1.0);
    // k of the other ranks busy at once (binomial at u): 1 + k kernels run.
    const double next = alone_s * binomial_mean(ranks - 1, u, [&](int k) {
                          return 1 + slower * std::max(0, 1 + k - free) / (ranks - free);
                        });
    if (std::fabs(next - s) <= 1e-15 * together_s) return next;
    s = next;
  }
  return s;
}

ComputeCost compute_cost(const RecordedStep& step, const ScheduleOp& op, Status* missing, int host_cores) {
  ComputeCost c;
  c.layer_busy = step.compute.kind == ComputeSpec::Kind::spin || step.compute.kind == ComputeSpec::Kind::gemm;
  if (op.quantization_kernel()) {
    c.kernel_s = kernel_seconds(step, op, missing);
  } else if (op.what == "idle") {
    c.layer_s = op.seconds;
  } else {
    if (op.what == "forward") c.layer_s = step.compute.seconds;
    if (op.what == "backward") c.layer_s = 2 * step.compute.seconds;
    // Kernels zb_optimizer did not time are left out, as before they were priced at all.
    if (step.kernels) {
      const KernelRates::StepKernelTime k = step.kernels->step_kernel_time(op, step.grad_dtype);
      const int ranks = step.topo.size / step.topo.nodes;
      // Where the ranks outnumber the cores, the updates start as the blocking wait before
      // them lets the ranks go, one a core, a wave at a time (simulate.h): each runs alone.
      if (std::isfinite(k.alone_s))
        c.kernel_s = op.what == "update" && ranks_outnumber_cores(host_cores, ranks)
                         ? k.alone_s
                         : crowded_kernel_seconds(k.alone_s, k.together_s, c.layer_s, c.layer_busy, ranks, host_cores);
    }
  }
  // Every kernel the same share faster on the fastest rank (KernelRates::rank_spread).
  c.lag_s = step.kernels ? c.kernel_s * step.kernels->rank_spread() : 0.0;
  return c;
}

bool ranks_outnumber_cores(int host_cores, int ranks_per_node) {
  return host_cores > 0 && ranks_per_node > host_cores;
}

double busy_stream_rate(int host_cores, int ranks_per_node, int busy_ranks) {
  if (host_cores <= 0 || ranks_per_node <= 0) return 1;
  if (busy_ranks < 0) busy_ranks = ranks_per_node;
  return std::clamp(double(host_cores) / (busy_ranks + ranks_per_node), 0.0, 1.0);
}

HostShare host_share(int host_cores, int ranks_per_node) {
  HostShare h;
  h.stream_rate = busy_stream_rate(host_cores, ranks_per_node);
  h.skewed_rate = busy_stream_rate(host_cores, ranks_per_node, (ranks_per_node + 1) / 2);
  if (ranks_outnumber_cores(host_cores, ranks_per_node))
    h.outnumbered_ranks = ranks_per_node, h.outnumbered_cores = host_cores;
  return h;
}

namespace {

// replay(), every collective's time on the stream `stretch` times the sweep's (its hand-off
// and wake-up kept).
StepPrediction replay_stretched(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                                double stretch, Status* missing, std::vector<TraceSpan>* spans,
                                std::vector<OpTiming>* timeline, std::vector<OpTiming>* comm_timeline) {
  const Pricer pricer(sweep, tiers, step.topo, inter_gbps);
  const int cores = sweep.host_cores();
  auto compute_seconds = [&](const ScheduleOp& op) {
    const ComputeCost c = compute_cost(step, op, missing, cores);
    return c.layer_s + c.kernel_s;
  };
  // The kernels run last in an op (a backward's gradient after its layer's compute).
  HostShare host = host_share(cores, step.topo.size / step.topo.nodes);
  host.busy_seconds = [&](const ScheduleOp& op) {
    const ComputeCost c = compute_cost(step, op, missing, cores);
    return c.kernel_s + (c.layer_busy ? c.layer_s : 0.0);
  };
  // Ranks whose kernels run at different speeds drift apart through the step.
  RankSkew skew;
  skew.lag_seconds = [&](const ScheduleOp& op) { return compute_cost(step, op, missing, cores).lag_s; };
  auto coll_cost = [&](const CollRecord& c) {
    CollCost cost = pricer.cost(c, missing);
    cost.seconds *= stretch;
    cost.cold_s *= stretch;  // NaN stays NaN: none
    return cost;
  };
  return predict_step(step.log.ops(), compute_seconds, coll_cost, spans, timeline,
                      host.stream_rate < 1 ? &host : nullptr, &skew, comm_timeline);
}

}  // namespace

StepPrediction replay(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                      Status* missing, std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline,
                      std::vector<OpTiming>* comm_timeline) {
  return replay_stretched(step, sweep, tiers, inter_gbps, 1, missing, spans, timeline, comm_timeline);
}

double exposed_per_comm(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                        const StepPrediction& p, Status* missing) {
  if (!(p.exposed_s >= kExposedPerCommFloor * p.stream_s) || !(p.exposed_s > 0)) return NAN;
  const double stretched =
      replay_stretched(step, sweep, tiers, inter_gbps, 1 + kExposedPerCommStep, missing, nullptr, nullptr, nullptr)
          .exposed_s;
  return (stretched / p.exposed_s - 1) / kExposedPerCommStep;
}

double quantize_seconds(const RecordedStep& step, Status* missing) {
  const std::vector<ScheduleOp>& ops = step.log.ops();
  size_t last = 0;  // the last step's marker
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == ScheduleOp::Kind::step) last = i;
  double seconds = 0;
  for (size_t i = last; i < ops.size(); ++i)
    if (ops[i].quantization_kernel()) seconds += kernel_seconds(step, ops[i], missing);
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
