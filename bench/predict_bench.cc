// The zb_predict benchmark body: record, price, replay, report (and explain).
#include "bench/predict_bench.h"

#include <cmath>
#include <cstdio>

#include "harness/predict/replay.h"

namespace zb {

namespace {

// The predicted step as a Chrome trace on the tracks of a measured one, for one rank: all
// ranks run the same schedule.
Status write_predicted_trace(Run& run, const PredictSetup& setup, const std::vector<CollRecord>& traffic,
                             const std::vector<TraceSpan>& spans, const StepPrediction& p) {
  int counts[3] = {0, 0, 0};
  for (const CollRecord& c : traffic) ++counts[int(c.op)];
  const Stage stage = setup.pipeline ? setup.pipeline_config.stage : setup.config.stage;
  std::string meta = std::string("\"stage\": \"") + stage_name(stage) +
                     "\", \"ranks\": " + std::to_string(setup.topo.size) + ", \"predicted\": true, \"collectives\": {";
  for (Coll c : {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather})
    meta += std::string(c == Coll::all_reduce ? "" : ", ") + "\"" + coll_name(c) + "\": " + std::to_string(counts[int(c)]);
  char exposed[64];
  std::snprintf(exposed, sizeof exposed, "\"exposed_us\": %.3f", p.exposed_s * 1e6);
  return run.driver().write_trace(setup.trace_path, spans, 0, meta + "}", exposed);
}

}  // namespace

Status run_predict_benchmark(Run& run, const PredictSetup& setup, PredictOutcome* out) {
  RecordedStep step;
  if (setup.pipeline)
    ZB_RETURN_IF_ERROR(record_pipeline_step(*setup.model, setup.pipeline_config, setup.compute, setup.topo, &step));
  else
    ZB_RETURN_IF_ERROR(record_zero_step(*setup.model, setup.config, setup.compute, setup.topo, &step));
  step.kernels = setup.kernels;
  const std::vector<CollRecord>& traffic = step.traffic;
  Status missing;
  std::vector<TraceSpan> spans;
  std::vector<OpTiming> timeline, comm_timeline;
  out->p = replay(step, *setup.sweep, *setup.tiers, setup.link_gbps, &missing, &spans, &timeline, &comm_timeline);
  ZB_RETURN_IF_ERROR(missing);
  const StepPrediction& p = out->p;
  // The rate the links between nodes need, where there are nodes and a link to model them.
  out->required_link_gbps = step_required_link_gbps(step, *setup.sweep, *setup.tiers, setup.exposed_limit, &missing);
  ZB_RETURN_IF_ERROR(missing);
  out->exposed_per_comm = exposed_per_comm(step, *setup.sweep, *setup.tiers, setup.link_gbps, p, &missing);
  ZB_RETURN_IF_ERROR(missing);
  const bool quantized = !setup.pipeline && stage_model(setup.config.stage).effective(setup.config.quant).any();
  const double quantize_s = quantize_seconds(step, &missing);
  if (quantized) {
    // Weighed against the same stage unquantized, on the same links.
    ZeroConfig plain_config = setup.config;
    plain_config.stage = unquantized_stage(setup.config.stage);
    plain_config.quant = {};
    RecordedStep plain;
    ZB_RETURN_IF_ERROR(record_zero_step(*setup.model, plain_config, setup.compute, setup.topo, &plain));
    out->beats_unquantized_below_gbps =
        quantized_beats_below_gbps(step, plain, *setup.sweep, *setup.tiers, &missing);
  }
  ZB_RETURN_IF_ERROR(missing);
  if (!setup.trace_path.empty()) ZB_RETURN_IF_ERROR(write_predicted_trace(run, setup, traffic, spans, p));
  Timing t;
  t.iterations = run.driver().iterations();
  t.mean_s = p.step_s;
  run.report(t);
  double volume = 0;
  for (const CollRecord& c : traffic) volume += volume_elements(c);
  // Ψ as the predicted benchmark counts it: the whole model, or this pipeline stage's layers.
  double psi = double(setup.model->params());
  if (setup.pipeline) {
    PipelineLayout lay;
    const PipelineConfig& c = setup.pipeline_config;
    ZB_RETURN_IF_ERROR(make_pipeline_layout(*setup.model, c.shape, c.bucket_elems, setup.topo.size, setup.topo.size, &lay));
    psi = double(lay.flat.params);
  }
  run.counter("ranks", setup.topo.size);
  run.counter("nodes", setup.topo.nodes);
  run.counter("params", psi);
  run.counter("collectives", p.collectives);
  run.counter("volume_psi_accounted", volume / psi);
  run.counter("step_s_predicted", p.step_s);
  run.counter("compute_s_predicted", p.compute_s);
  run.counter("comm_s_predicted", p.comm_s);
  run.counter("exposed_comm_s_predicted", p.exposed_s);
  run.counter("skew_wait_s_predicted", p.skew_wait_s);
  run.counter("exposed_per_comm", out->exposed_per_comm);
  run.counter("extrapolated", p.extrapolated ? 1 : 0);
  run.counter("modelled", p.modelled ? 1 : 0);
  if (std::isfinite(setup.link_gbps)) run.counter("link_gbps", setup.link_gbps);
  run.counter("required_link_gbps", out->required_link_gbps);
  if (quantized) {
    run.counter("quantize_s_predicted", quantize_s);
    run.counter("beats_unquantized_below_gbps", out->beats_unquantized_below_gbps);
  }
  if (setup.measured) {
    // The prediction held against the measured step: relative errors (predicted / measured - 1)
    // and, for exposed communication, which can be near zero, the difference in seconds too.
    auto measured = [&](const char* key) {
      auto it = setup.measured->find(key);
      return it == setup.measured->end() ? NAN : it->second;
    };
    const double comm = measured("comm_s"), exposed = measured("exposed_comm_s");
    run.counter("comm_s_measured", comm);
    run.counter("exposed_comm_s_measured", exposed);
    run.counter("skew_wait_s_measured", measured("skew_wait_s"));
    run.counter("comm_error", p.comm_s / comm - 1);
    run.counter("exposed_error", p.exposed_s / exposed - 1);
    run.counter("exposed_error_s", p.exposed_s - exposed);
    // Whether the step ran on the host the sweep timed, by their reference collectives: the
    // ratio of the two times, and 1 where the sweep kept one speed and the step ran at it (NaN
    // where either timed none). Where it is 0 the errors compare two hosts, not the model.
    const HostReference& swept = setup.sweep->reference();
    const double reference = measured("reference_s");
    run.counter("reference_ratio", reference / swept.median_s);
    run.counter("host_steady", !std::isfinite(reference / swept.median_s) ? NAN
                               : swept.steady() && same_host_speed(reference, swept.median_s) ? 1 : 0);
  }
  if (!setup.explain_trace.empty()) {
    MeasuredStep m;
    ZB_RETURN_IF_ERROR(read_measured_step(setup.explain_trace, -1, &m));
    // A trace of the round with communication alone lines up against its own replay.
    const Explanation x = m.comm_only ? explain(comm_timeline, m, setup.sweep->handoff_s(Coll::all_reduce))
                                      : explain(timeline, m, setup.sweep->handoff_s(Coll::all_reduce), &p);
    out->explanation = (m.comm_only ? "# the round with communication alone (comm_s's), as the trace drew it\n" : "") +
                       x.table + "# " + x.causes + "\n";
    run.counter("explain_compute_s", x.compute_s);
    run.counter("explain_collective_s", x.collective_s);
    run.counter("explain_late_start_s", x.late_start_s);
    run.counter("explain_skew_s", x.skew_s);
    run.counter("explain_handoff_s", x.handoff_s);
  }
  return Status::ok();
}

}  // namespace zb
