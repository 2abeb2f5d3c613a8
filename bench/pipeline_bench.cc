// The zb_pipeline benchmark body: idle slots, phases, metrics and counters.
#include "bench/pipeline_bench.h"

#include <algorithm>
#include <cstdio>

#include "harness/core/clock.h"
#include "harness/driver/wait_causes.h"
#include "harness/plan/pipeline_formula.h"
#include "harness/plan/state_formula.h"

namespace zb {
namespace {

// Seconds each virtual stage of the pipeline computes, forward and backward, for the idle slots
// of the schedule: the compute spec's own time for sleep and spin, the GEMMs timed (after an
// untimed run) for gemm; the slowest rank's, so every rank of the group idles alike.
Status stage_seconds(Driver& d, LayerCompute& lc, Compute& compute, const PipelineLayout& lay,
                     std::vector<double>* fwd, std::vector<double>* bwd) {
  const ComputeSpec& spec = lc.spec();
  for (const auto& [first, end] : lay.virtual_layers) {
    double f = 0, b = 0;
    if (spec.kind == ComputeSpec::Kind::sleep || spec.kind == ComputeSpec::Kind::spin) {
      f = spec.seconds * (end - first);
      b = 2 * f;  // LayerCompute's backward is twice its forward
    } else if (spec.kind == ComputeSpec::Kind::gemm) {
      for (int pass = 0; pass < 2; ++pass) {
        double t0 = now_seconds();
        for (int l = first; l < end; ++l) ZB_RETURN_IF_ERROR(lc.forward(l));
        ZB_RETURN_IF_ERROR(compute.synchronize());
        double t1 = now_seconds();
        for (int l = first; l < end; ++l) ZB_RETURN_IF_ERROR(lc.backward(l));
        ZB_RETURN_IF_ERROR(compute.synchronize());
        f = t1 - t0, b = now_seconds() - t1;
      }
    }
    fwd->push_back(f);
    bwd->push_back(b);
  }
  ZB_RETURN_IF_ERROR(d.max_over_ranks(fwd));
  return d.max_over_ranks(bwd);
}

// The step --trace draws, after an untimed one with no barrier between, as the timed steps run
// back to back, issue times recorded from the untimed one on (zb_zero's traced step says why);
// of kTraceCandidates such steps, the one whose exposed time is their median.
Status traced_step(Driver& d, PipelineStep& p, const PipelineConfig& c, const std::string& path,
                   double clock_offset_s) {
  d.comm().set_record_times(true);
  p.trace().enable(true);
  TraceCandidate drawn;
  std::string tried;
  auto run = [&](TraceCandidate* candidate) -> Status {
    ZB_RETURN_IF_ERROR(run_candidate_step(p, candidate));
    candidate->tail_s = p.last_tail_s();
    return Status::ok();
  };
  ZB_RETURN_IF_ERROR(draw_median_step(
      d, [&](int k) { return k == 0 ? p.step() : Status::ok(); }, run, [&] { return p.finish(); }, &drawn, &tried));
  p.trace().spans() = drawn.spans;
  const double origin = shared_origin(d, drawn.start_s, clock_offset_s);
  p.add_comm_spans(drawn.first, origin, drawn.end);
  p.trace().enable(false);
  d.comm().set_record_times(false);
  std::vector<CollRecord> recs = d.comm().traffic().records();
  if (p.waits().host_waits()) {  // each wait in its two parts, as zb_zero's trace
    LastIssue last;
    ZB_RETURN_IF_ERROR(last_issues(d, recs, clock_offset_s, &last));
    split_wait_spans(drawn.waits, last, &p.trace().spans());
  }
  // The traffic log's own count of the step's collectives, so a reader can check the trace.
  int counts[3] = {0, 0, 0};
  for (size_t i = drawn.first; i < drawn.end; ++i) ++counts[int(recs[i].op)];
  const PipelineShape& s = c.shape;
  std::string meta = "\"stage\": \"" + std::string(stage_name(c.stage)) + "\", \"ranks\": " +
                     std::to_string(d.size()) + ", \"microbatches\": " + std::to_string(s.microbatches) +
                     ", \"chunks\": " + std::to_string(s.chunks) + ", \"pp\": " + std::to_string(s.stages) +
                     ", \"pp_rank\": " + std::to_string(s.rank) + ", \"candidates_exposed_us\": [" + tried +
                     "], \"collectives\": {";
  for (Coll op : {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather})
    meta += std::string(op == Coll::all_reduce ? "" : ", ") + "\"" + coll_name(op) + "\": " +
            std::to_string(counts[int(op)]);
  char waits[96];
  std::snprintf(waits, sizeof waits, "\"exposed_us\": %.3f, \"tail_us\": %.3f", drawn.exposed_s * 1e6,
                drawn.tail_s * 1e6);
  return d.write_trace(path, p.trace().spans(), origin, meta + "}", waits);
}

}  // namespace

Status run_pipeline_benchmark(Run& run, Compute& compute, const PipelineBenchSetup& setup, PipelineResult* out) {
  Driver& d = run.driver();
  Communicator& comm = d.comm();
  const int n = comm.size();
  const PipelineConfig& config = setup.config;
  std::unique_ptr<LayerCompute> lc;
  ZB_RETURN_IF_ERROR(LayerCompute::create(setup.compute, *setup.model, compute, d.cpu_threads_per_rank(), &lc));
  std::unique_ptr<PipelineStep> p;
  ZB_RETURN_IF_ERROR(PipelineStep::create(comm, compute, *setup.model, config, &p));
  p->set_layer_compute(lc.get());
  std::vector<double> fwd, bwd, idle;
  ZB_RETURN_IF_ERROR(stage_seconds(d, *lc, compute, p->layout(), &fwd, &bwd));
  ZB_RETURN_IF_ERROR(pipeline_idle(config.shape, fwd, bwd, &idle));
  for (double s : idle) out->idle_s += s;
  p->set_idle(idle);
  const double psi = double(p->layout().flat.params);
  double clock_offset_s = 0;
  ZB_RETURN_IF_ERROR(clock_offset(d, &clock_offset_s));
  comm.traffic().clear();

  Timing t;
  std::vector<std::vector<WaitRecord>> step_waits;  // every step's, the timed ones last
  auto step = [&]() -> Status {
    ZB_RETURN_IF_ERROR(p->step());
    // Measured where compute waited.
    run.sample("exposed", p->last_exposed_s());
    run.sample("tail", p->last_tail_s());
    step_waits.push_back(p->waits().step_waits());
    return Status::ok();
  };
  comm.set_record_times(true);  // every collective's issue time, for the skew
  ZB_RETURN_IF_ERROR(run.per_iteration(step, &t));
  comm.set_record_times(false);
  LastIssue last;
  ZB_RETURN_IF_ERROR(last_issues(d, comm.traffic().records(), clock_offset_s, &last));
  step_waits.erase(step_waits.begin(), step_waits.end() - std::min<ptrdiff_t>(ptrdiff_t(step_waits.size()),
                                                                             ptrdiff_t(d.iterations())));
  ExposedByCause causes;
  ZB_RETURN_IF_ERROR(gather_exposed_by_cause(d, step_waits, last, &causes));
  if (!p->waits().host_waits()) causes = ExposedByCause();
  run.report(t);
  out->step_s = t.median_s;
  out->exposed_s = t.side("exposed");
  out->tail_s = t.side("tail");
  if (!setup.trace_path.empty())
    ZB_RETURN_IF_ERROR(traced_step(d, *p, config, setup.trace_path, clock_offset_s));
  ZB_RETURN_IF_ERROR(p->finish());

  const double steps = double(p->steps_done());
  out->volume_accounted = comm.traffic().volume_elements() / steps / psi;
  out->volume_measured =
      setup.measure_wire ? d.max_over_ranks(comm.traffic().measured_volume_elements(n)) / steps / psi : NAN;
  out->collectives = double(comm.traffic().size()) / steps;
  const double wire_accounted = comm.traffic().ideal_wire_bytes(n) / steps;
  if (setup.check) {
    std::vector<Segment> segs = p->check_segments();
    CheckState got, want;
    ZB_RETURN_IF_ERROR(p->state_to_host(segs, &got));
    // The reference sums M * N contributions per step: micro-batch m of rank r is rank m * N + r.
    StageConfig ref;
    ref.optimizer = config.optimizer;
    ref.grad_dtype = config.grad_dtype;
    ZB_RETURN_IF_ERROR(reference_state(ref, n * config.shape.microbatches, p->steps_done(), segs, compute, &want));
    out->wrong = d.sum_over_ranks(double(count_mismatches(got, want)));
  }
  if (setup.split) {
    // The state is meaningless from here on. Whole step, communication alone and compute
    // alone in rounds, each its fastest step, each after an untimed step of its kind.
    auto in_mode = [&](StepMode mode) {
      return Run::Variant{[&, mode]() -> Status {
                            ZB_RETURN_IF_ERROR(p->finish());
                            p->set_mode(mode);
                            return p->step();
                          },
                          [&] { return p->step(); }, [&] { return p->finish(); }};
    };
    std::vector<Timing> t3;
    ZB_RETURN_IF_ERROR(run.interleaved(
        {in_mode(StepMode::full), in_mode(StepMode::comm_only), in_mode(StepMode::compute_only)}, &t3));
    p->set_mode(StepMode::full);
    out->comm_s = t3[1].min_s;
    out->compute_s = t3[2].min_s;
    // Yardsticks for the exposed time: the largest chunk's reductions of one micro-batch, and
    // the step's weight gathers, each alone (medians).
    int largest = 0;
    const auto& cu = p->layout().chunk_units;
    auto chunk_elems = [&](int c) {
      const auto& units = p->layout().flat.units;
      return units[size_t(cu[size_t(c)].second) - 1].offset + units[size_t(cu[size_t(c)].second) - 1].padded -
             units[size_t(cu[size_t(c)].first)].offset;
    };
    for (int c = 1; c < int(cu.size()); ++c)
      if (chunk_elems(c) > chunk_elems(largest)) largest = c;
    Timing alone;
    ZB_RETURN_IF_ERROR(run.per_iteration([&] { return p->reduce_chunk(largest); }, &alone));
    out->chunk_reduce_s = alone.median_s;
    ZB_RETURN_IF_ERROR(run.per_iteration([&] { return p->gather_weights(); }, &alone));
    out->gather_s = alone.median_s;
  }

  const Stage stage = config.stage;
  const int g = int(dtype_size(config.grad_dtype)), M = config.shape.microbatches;
  out->per_param = d.max_over_ranks(double(p->measured_state_bytes()) / psi);
  out->formula = bytes_per_param(stage, config.optimizer.kind, g, n);
  out->grad_per_param = d.max_over_ranks(double(p->measured_grad_bytes()) / psi);
  out->grad_formula = pipeline_grad_bytes_per_param(stage, g, n, double(p->slot_elems()), psi);
  out->volume_formula = pipeline_traffic(stage, n, psi, g, M).elements / psi;
  run.counter("ranks", n);
  run.counter("params", psi);
  run.counter("padding", double(p->layout().flat.padding()));
  run.counter("microbatches", M);
  run.counter("chunks", config.shape.chunks);
  run.counter("volume_psi_accounted", out->volume_accounted);
  run.counter("volume_psi_formula", out->volume_formula);
  run.counter("volume_psi_measured", out->volume_measured);
  run.counter("collectives", out->collectives);
  run.counter("wire_bytes_accounted", wire_accounted);
  run.counter("bytes_per_param_measured", out->per_param);
  run.counter("bytes_per_param_accounted", double(p->tracker().resident_state_bytes()) / psi);
  run.counter("bytes_per_param_formula", out->formula);
  run.counter("grad_bytes_per_param_measured", out->grad_per_param);
  run.counter("grad_bytes_per_param_formula", out->grad_formula);
  run.counter("transient_peak_bytes", double(p->tracker().transient_peak_bytes()));
  run.counter("step_s", out->step_s);
  run.counter("compute_s", out->compute_s);
  run.counter("comm_s", out->comm_s);
  run.counter("exposed_comm_s", out->exposed_s);
  run.counter("skew_wait_s", causes.skew_s);
  run.counter("wire_wait_s", causes.wire_s);
  run.counter("late_rank", causes.late_rank);
  run.counter("late_finish_wait_s", causes.late_finish_s);
  run.counter("tail_comm_s", out->tail_s);
  run.counter("schedule_idle_s", out->idle_s);
  run.counter("chunk_reduce_s", out->chunk_reduce_s);
  run.counter("gather_s", out->gather_s);
  if (setup.check) run.counter("wrong", out->wrong);
  return Status::ok();
}

}  // namespace zb
