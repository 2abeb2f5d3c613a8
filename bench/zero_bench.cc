// The zb_zero benchmark body: phases, metrics and counters.
#include "bench/zero_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/comm/node_traffic.h"
#include "harness/driver/node_window.h"
#include "harness/driver/wait_causes.h"
#include "harness/plan/state_formula.h"
#include "harness/stage/quant_reference.h"
#include "harness/stage/overlap.h"

namespace zb {

// The step --trace draws, run as its round is timed: right after an untimed step of its kind,
// with no barrier between (the communication-alone round's pair from a barrier, as comm_s's
// rounds; the full step's as the timed steps run, back to back). So the step drawn meets what
// a timed one meets: the collectives the step before left in flight, and the ranks as far
// apart as that step's end left them (a barrier there hid a straggler's wait; on 4 ranks
// sharing 2 cores, most of dp's exposed time). Issue times are recorded from the untimed step
// on, so that a wait for a collective it left in flight is split at its last issue too.
// kTraceCandidates steps run so (the full step's back to back, each communication-alone pair
// from its barrier), and the one drawn is the one whose exposed time is their median
// (draw_median_step): a step with a rank's layer 7 ms late (seen on the 2-core VM) draws no
// typical one.
static Status traced_step(Driver& d, ZeroStep& z, const std::string& stage, const std::string& path,
                          double clock_offset_s, bool comm_only) {
  d.comm().set_record_times(true);
  z.trace().enable(true);
  TraceCandidate drawn;
  std::string tried;
  auto before = [&](int k) -> Status {
    // The communication-alone round's pair from a barrier each time, as comm_s's rounds run; the
    // full step's untimed one once, its candidates then back to back as the timed steps run.
    if (comm_only) {
      ZB_RETURN_IF_ERROR(d.comm().barrier());
      ZB_RETURN_IF_ERROR(z.finish());
      z.set_mode(StepMode::comm_only);
    }
    return comm_only || k == 0 ? z.step() : Status::ok();
  };
  auto run = [&](TraceCandidate* c) { return run_candidate_step(z, c); };
  ZB_RETURN_IF_ERROR(draw_median_step(d, before, run, [&] { return z.finish(); }, &drawn, &tried));
  z.set_mode(StepMode::full);
  z.trace().spans() = drawn.spans;
  const double origin = shared_origin(d, drawn.start_s, clock_offset_s);
  z.add_comm_spans(drawn.first, origin, drawn.end);
  z.trace().enable(false);
  d.comm().set_record_times(false);
  std::vector<CollRecord> recs = d.comm().traffic().records();
  // Each wait in two parts: until the last rank issued what it waited for, and the rest.
  if (z.waits().host_waits()) {
    LastIssue last;
    ZB_RETURN_IF_ERROR(last_issues(d, recs, clock_offset_s, &last));
    split_wait_spans(drawn.waits, last, &z.trace().spans());
  }
  // The traffic log's own count of the step's collectives, so a reader can check that the
  // trace holds every one of them.
  int counts[4] = {0, 0, 0, 0};
  for (size_t i = drawn.first; i < drawn.end; ++i) ++counts[int(recs[i].op)];
  std::string meta = "\"stage\": \"" + stage + "\", \"round\": \"" + (comm_only ? "comm" : "step") +
                     "\", \"ranks\": " + std::to_string(d.size()) + ", \"candidates_exposed_us\": [" + tried +
                     "], \"collectives\": {";
  // All-to-all only where the step issued one (qgZ): an unquantized step's trace reads as
  // zb_predict's replay of it, which knows the three others.
  for (Coll c : {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather, Coll::all_to_all})
    if (c != Coll::all_to_all || counts[int(c)] > 0)
      meta += std::string(c == Coll::all_reduce ? "" : ", ") + "\"" + coll_name(c) + "\": " +
              std::to_string(counts[int(c)]);
  // Each rank's exposed communication of this step, which its wait spans add up to.
  char exposed[64];
  std::snprintf(exposed, sizeof exposed, "\"exposed_us\": %.3f", drawn.exposed_s * 1e6);
  return d.write_trace(path, z.trace().spans(), origin, meta + "}", exposed);
}

Status run_zero_benchmark(Run& run, Compute& compute, const ZeroBenchSetup& setup, ZeroResult* out) {
  Driver& d = run.driver();
  Communicator& comm = d.comm();
  const int n = comm.size();
  const double psi = double(setup.model->params());
  std::unique_ptr<LayerCompute> lc;
  ZB_RETURN_IF_ERROR(LayerCompute::create(setup.compute, *setup.model, compute, d.cpu_threads_per_rank(), &lc));
  std::unique_ptr<ZeroStep> z;
  ZB_RETURN_IF_ERROR(ZeroStep::create(comm, compute, *setup.model, setup.config, &z));
  z->set_layer_compute(lc.get());
  // Rank 0's clock against this rank's, for when every rank issued each collective.
  double clock_offset_s = 0;
  ZB_RETURN_IF_ERROR(clock_offset(d, &clock_offset_s));
  comm.traffic().clear();
  const bool quantized = z->quantization().any();

  Timing t;
  std::vector<std::vector<WaitRecord>> step_waits;  // every step's, the timed ones last
  auto step = [&]() -> Status {
    ZB_RETURN_IF_ERROR(z->step());
    run.sample("exposed", z->last_exposed_s());  // measured where compute waited
    if (quantized) run.sample("quantize", z->last_quantize_s());
    step_waits.push_back(z->waits().step_waits());
    return Status::ok();
  };
  // The node counters are read around every step the log holds so far (warm-up and timed),
  // so both sides of inter_node_bytes cover the same collectives.
  // Every collective's issue time is recorded (a clock read per collective), for the skew.
  NodeWindow window;
  comm.set_record_times(true);
  ZB_RETURN_IF_ERROR(measure_node_window(d, [&]() -> Status {
    ZB_RETURN_IF_ERROR(run.per_iteration(step, &t));
    return z->finish();
  }, &window));
  comm.set_record_times(false);
  std::vector<CollRecord> windowed = comm.traffic().records();
  // The timed steps' waits by cause: the last rank to issue each collective, over the log.
  LastIssue last;
  ZB_RETURN_IF_ERROR(last_issues(d, windowed, clock_offset_s, &last));
  step_waits.erase(step_waits.begin(), step_waits.end() - std::min<ptrdiff_t>(ptrdiff_t(step_waits.size()),
                                                                             ptrdiff_t(d.iterations())));
  ExposedByCause causes;
  ZB_RETURN_IF_ERROR(gather_exposed_by_cause(d, step_waits, last, &causes));
  if (!z->waits().host_waits()) causes = ExposedByCause();  // the engine's stream waited: no split
  const double window_steps = double(z->steps_done());
  run.report(t);
  out->step_s = t.median_s;
  out->exposed_s = t.side("exposed");
  out->skew_wait_s = causes.skew_s;
  out->wire_wait_s = causes.wire_s;
  out->late_rank = causes.late_rank;
  out->late_finish_wait_s = causes.late_finish_s;
  auto trace = [&]() {
    return traced_step(d, *z, config_label(setup.config.stage, setup.config.quant), setup.trace_path,
                       clock_offset_s, setup.trace_comm_only);
  };
  // A step with communication alone leaves the state behind the reference: drawn last.
  if (!setup.trace_path.empty() && !setup.trace_comm_only) ZB_RETURN_IF_ERROR(trace());
  ZB_RETURN_IF_ERROR(z->finish());

  const double steps = double(z->steps_done());
  out->volume_accounted = comm.traffic().volume_elements() / steps / psi;
  out->volume_measured = setup.measure_wire ? d.max_over_ranks(comm.traffic().measured_volume_elements(n)) / steps / psi : NAN;
  const double wire_accounted = comm.traffic().ideal_wire_bytes(n) / steps;
  const Topology& topo = d.topology();
  NodeVolume nv = node_volume(comm.traffic().records(), topo);
  out->volume_intra = nv.intra / steps / psi;
  out->volume_inter = nv.inter / steps / psi;
  NodeBytes nb = ring_node_bytes(windowed, topo);
  out->inter_accounted = d.max_over_nodes(nb.inter) / window_steps;
  out->intra_accounted = d.max_over_nodes(nb.intra) / window_steps;
  out->inter_measured = window.inter / window_steps;
  // Same-node traffic reaches the loopback only over sockets; shared memory bypasses it.
  out->intra_measured = setup.measure_wire ? window.intra / window_steps : NAN;
  if (setup.check) {
    std::vector<Segment> segs = z->check_segments();
    CheckState got;
    ZB_RETURN_IF_ERROR(z->state_to_host(segs, &got));
    if (quantized) {
      // Held to the interval every quantization within the kernels' bounds can reach.
      BoundedState want;
      const Topology& topo = d.topology();
      ZB_RETURN_IF_ERROR(bounded_reference(setup.config, {n, topo.local_size, topo.nodes}, z->steps_done(), segs,
                                           [&d](std::vector<double>* v) { return d.max_over_ranks(v); },
                                           compute.cpu_threads(), &want));
      const BoundCheck c = check_bounded(got, want);
      out->wrong = d.sum_over_ranks(double(c.outside));
      const double count = d.sum_over_ranks(double(c.count));
      const double rms = std::sqrt(d.sum_over_ranks(c.ref_sq) / count);
      out->error_max = d.max_over_ranks(c.error_max) / rms;
      out->error_rms = std::sqrt(d.sum_over_ranks(c.error_sq) / count) / rms;
      out->error_bound = d.max_over_ranks(c.bound_max) / rms;
    } else {
      CheckState want;
      ZB_RETURN_IF_ERROR(reference_state(setup.config, n, z->steps_done(), segs, compute, &want));
      out->wrong = d.sum_over_ranks(double(count_mismatches(got, want)));
    }
  }
  if (setup.split) {
    // The whole step, communication alone and compute alone, in rounds; the state is
    // meaningless from here on. Each is its fastest step: jitter only ever adds time.
    // Each timed step follows an untimed one of the same kind, so it meets the collectives
    // that kind leaves in flight (z1/z2's weight all-gathers), as a steady-state step does.
    auto in_mode = [&](StepMode mode) {
      return Run::Variant{[&, mode]() -> Status {
                            ZB_RETURN_IF_ERROR(z->finish());
                            z->set_mode(mode);
                            return z->step();
                          },
                          step, [&] { return z->finish(); }};
    };
    std::vector<Timing> t3;
    ZB_RETURN_IF_ERROR(run.interleaved(
        {in_mode(StepMode::full), in_mode(StepMode::comm_only), in_mode(StepMode::compute_only)}, &t3));
    z->set_mode(StepMode::full);
    out->comm_s = t3[1].min_s;
    out->compute_s = t3[2].min_s;
    out->exposed_diff_s = t3[0].min_s - out->compute_s;
    out->overlap = overlap_efficiency(out->exposed_s, out->comm_s, out->compute_s);
  }
  if (!setup.trace_path.empty() && setup.trace_comm_only) ZB_RETURN_IF_ERROR(trace());

  const Stage stage = setup.config.stage;
  const int gbytes = int(dtype_size(setup.config.grad_dtype));
  // The busiest rank bounds the step, so memory is reported for it.
  out->per_param_measured = d.max_over_ranks(double(z->measured_state_bytes()) / psi);
  out->per_param_accounted = double(z->tracker().resident_state_bytes()) / psi;
  out->formula = bytes_per_param(stage, setup.config.optimizer.kind, gbytes, n, topo.local_size);
  run.counter("ranks", n);
  run.counter("nodes", topo.nodes);
  run.counter("ranks_per_node", topo.local_size);
  run.counter("params", psi);
  run.counter("padding", double(z->layout().padding()));
  run.counter("volume_psi_accounted", out->volume_accounted);
  run.counter("volume_psi_measured", out->volume_measured);
  run.counter("volume_psi_intra_accounted", out->volume_intra);
  run.counter("volume_psi_inter_accounted", out->volume_inter);
  run.counter("inter_node_bytes_accounted", out->inter_accounted);
  run.counter("inter_node_bytes_measured", out->inter_measured);
  run.counter("intra_node_bytes_accounted", out->intra_accounted);
  run.counter("intra_node_bytes_measured", out->intra_measured);
  run.counter("bytes_per_param_measured", out->per_param_measured);
  run.counter("bytes_per_param_accounted", out->per_param_accounted);
  run.counter("bytes_per_param_formula", out->formula);
  run.counter("transient_peak_bytes", double(z->tracker().transient_peak_bytes()));
  run.counter("wire_bytes_accounted", wire_accounted);
  run.counter("step_s", out->step_s);
  run.counter("comm_s", out->comm_s);
  run.counter("compute_s", out->compute_s);
  run.counter("exposed_comm_s", out->exposed_s);
  run.counter("skew_wait_s", out->skew_wait_s);
  run.counter("wire_wait_s", out->wire_wait_s);
  run.counter("late_rank", out->late_rank);
  run.counter("late_finish_wait_s", out->late_finish_wait_s);
  run.counter("exposed_comm_diff_s", out->exposed_diff_s);
  run.counter("overlap_eff", out->overlap);
  if (quantized) {
    out->quantize_s = t.side("quantize");
    run.counter("quantize_s", out->quantize_s);
    if (setup.check) {
      run.counter("weight_error_max", out->error_max);
      run.counter("weight_error_rms", out->error_rms);
      run.counter("weight_error_bound", out->error_bound);
    }
  }
  if (setup.check) run.counter("wrong", out->wrong);
  return Status::ok();
}

}  // namespace zb
