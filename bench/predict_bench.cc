// The zb_predict benchmark body: record, replay, report.
#include "bench/predict_bench.h"

#include <cmath>
#include <cstdio>

#include "harness/predict/record.h"

namespace zb {

Status run_predict_benchmark(Run& run, const PredictSetup& setup, StepPrediction* out) {
  // Two steps, so the second meets what the first leaves in flight (z1/z2's weight gathers),
  // as a steady-state step does; the prediction is the second's.
  ScheduleLog log;
  std::vector<CollRecord> traffic;
  if (setup.pipeline)
    ZB_RETURN_IF_ERROR(
        record_pipeline_schedule(*setup.model, setup.pipeline_config, setup.compute, setup.topo, 2, &log, &traffic));
  else
    ZB_RETURN_IF_ERROR(record_zero_schedule(*setup.model, setup.config, setup.topo, 2, &log, &traffic));
  Status missing;
  auto coll_cost = [&](const CollRecord& c) {
    // A group that holds every rank (the node group on one node) is the world: its sweep.
    const Group g = c.ranks == setup.topo.size ? Group::world : c.group;
    const CollModel* m = setup.sweep->find(c.op, c.dtype, group_name(g));
    if (!m) {
      if (missing)
        missing = Status::error("--sweep has no " + std::string(coll_name(c.op)) + " of " + dtype_name(c.dtype) +
                                " over the " + group_name(g) + " group: sweep that op, dtype and group too");
      return CollCost{0, 0, true};
    }
    const CollModel::Prediction p = m->predict(double(c.bytes()));
    // With a serial sweep, the hand-off a wait that blocks pays once the collective is done.
    return CollCost{p.seconds, setup.sweep->handoff_s(c.op, c.dtype, group_name(g)), p.extrapolated};
  };
  auto compute_seconds = [&](const ScheduleOp& op) {
    // What --compute puts in the step; the synthetic backward and the optimizer's update
    // are not modelled.
    if (op.what == "forward") return setup.compute.seconds;
    if (op.what == "backward") return 2 * setup.compute.seconds;
    return op.what == "idle" ? op.seconds : 0.0;
  };
  std::vector<TraceSpan> spans;
  *out = predict_step(log.ops(), compute_seconds, coll_cost, &spans);
  ZB_RETURN_IF_ERROR(missing);
  if (!setup.trace_path.empty()) {
    // The measured trace's tracks and metadata, for one rank: all ranks run the same schedule.
    int counts[3] = {0, 0, 0};
    for (const CollRecord& c : traffic) ++counts[int(c.op)];
    const Stage stage = setup.pipeline ? setup.pipeline_config.stage : setup.config.stage;
    std::string meta = std::string("\"stage\": \"") + stage_name(stage) +
                       "\", \"ranks\": " + std::to_string(setup.topo.size) + ", \"predicted\": true, \"collectives\": {";
    for (Coll c : {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather})
      meta += std::string(c == Coll::all_reduce ? "" : ", ") + "\"" + coll_name(c) + "\": " +
              std::to_string(counts[int(c)]);
    char exposed[64];
    std::snprintf(exposed, sizeof exposed, "\"exposed_us\": %.3f", out->exposed_s * 1e6);
    ZB_RETURN_IF_ERROR(run.driver().write_trace(setup.trace_path, spans, 0, meta + "}", exposed));
  }
  Timing t;
  t.iterations = run.driver().iterations();
  t.mean_s = out->step_s;
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
  run.counter("params", psi);
  run.counter("collectives", out->collectives);
  run.counter("volume_psi_accounted", volume / psi);
  run.counter("step_s_predicted", out->step_s);
  run.counter("compute_s_predicted", out->compute_s);
  run.counter("comm_s_predicted", out->comm_s);
  run.counter("exposed_comm_s_predicted", out->exposed_s);
  run.counter("extrapolated", out->extrapolated ? 1 : 0);
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
    run.counter("comm_error", out->comm_s / comm - 1);
    run.counter("exposed_error", out->exposed_s / exposed - 1);
    run.counter("exposed_error_s", out->exposed_s - exposed);
  }
  return Status::ok();
}

}  // namespace zb
