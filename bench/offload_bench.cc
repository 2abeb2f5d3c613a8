// The zb_offload benchmark body: the timed steps and their waits, the copies alone, memory,
// the check, counters and the trace.
#include "bench/offload_bench.h"

#include <algorithm>

#include "harness/core/clock.h"

namespace zb {
namespace {

// A pinned copy of `bytes` alone, each direction by itself and both at once (two engines), in
// this run: the bound the step's copies are held against. Four copies per timed iteration.
Status copy_limits(Run& run, MemKind kind, size_t bytes, OffloadResult* out) {
  Buffer dev[2], host[2];
  for (int i = 0; i < 2; ++i) {
    ZB_RETURN_IF_ERROR(Buffer::allocate(kind, bytes, &dev[i]));
    ZB_RETURN_IF_ERROR(Buffer::allocate(offload_host_kind(kind), bytes, &host[i]));
    ZB_RETURN_IF_ERROR(copy_bytes(dev[i].data(), kind, host[i].data(), host[i].kind(), bytes));  // touch both
  }
  // After the buffers, so they outlive the engines' threads on every way out.
  std::unique_ptr<CopyEngine> a, b;
  ZB_RETURN_IF_ERROR(CopyEngine::create(kind, &a));
  ZB_RETURN_IF_ERROR(CopyEngine::create(kind, &b));
  constexpr int kCopies = 4;
  auto timed = [&](bool d2h, bool h2d, double* gbps) -> Status {
    Timing t;
    ZB_RETURN_IF_ERROR(run.per_iteration([&]() -> Status {
      for (int i = 0; i < kCopies; ++i) {
        if (d2h) a->copy(host[0].data(), dev[0].data(), bytes, CopyDir::d2h);
        if (h2d) b->copy(dev[1].data(), host[1].data(), bytes, CopyDir::h2d);
      }
      ZB_RETURN_IF_ERROR(a->synchronize());
      return b->synchronize();
    }, &t));
    *gbps = double(bytes) * kCopies * (int(d2h) + int(h2d)) / t.median_s / 1e9;
    return Status::ok();
  };
  ZB_RETURN_IF_ERROR(timed(true, false, &out->limit_d2h));
  ZB_RETURN_IF_ERROR(timed(false, true, &out->limit_h2d));
  return timed(true, true, &out->limit_both);
}

Status write_trace(Driver& d, Trace& trace, CopyEngine& engine, const std::string& path,
                   const std::function<Status()>& step, const std::string& meta) {
  ZB_RETURN_IF_ERROR(d.comm().barrier());
  trace.clear();
  trace.enable(true);
  engine.take_spans();
  engine.set_trace(true);
  const double origin = now_seconds();
  ZB_RETURN_IF_ERROR(step());
  ZB_RETURN_IF_ERROR(engine.synchronize());
  engine.set_trace(false);
  trace.enable(false);
  for (TraceSpan& s : engine.take_spans()) trace.spans().push_back(std::move(s));
  return d.write_trace(path, trace.spans(), origin, meta);
}

std::string copy_label(MemKind kind) {
  return kind == MemKind::device ? "copy: pinned host <-> device (PCIe or C2C)" : "copy: host-to-host";
}

// Counters both families share.
void common_counters(Run& run, const OffloadResult& r, int slots) {
  run.counter("slots", slots);
  run.counter("device_bytes_per_param_measured", r.device_per_param);
  run.counter("device_bytes_per_param_formula", r.device_formula);
  run.counter("host_bytes_per_param_measured", r.host_per_param);
  run.counter("d2h_GBps", r.d2h_GBps);
  run.counter("h2d_GBps", r.h2d_GBps);
  run.counter("copy_limit_GBps", r.limit);
  run.counter("copy_limit_d2h_GBps", r.limit_d2h);
  run.counter("copy_limit_h2d_GBps", r.limit_h2d);
  run.counter("copy_limit_both_GBps", r.limit_both);
  run.counter("host_accumulate_GBps", r.accumulate_GBps);
  run.counter("copy_s", r.copy_s);
  run.counter("exposed_copy_s", r.exposed_s);
  run.counter("hidden_frac", r.hidden_frac);
  run.counter("step_s", r.step_s);
  run.counter("compute_per_chunk_s", r.compute_per_chunk_s);
  run.counter("hide_condition_s", r.hide_condition_s);
  run.counter("wrong", r.wrong);
}

}  // namespace

Status run_offload_grads(Run& run, Compute& compute, const OffloadBenchSetup& setup, OffloadResult* out) {
  Driver& d = run.driver();
  Communicator& comm = d.comm();
  const int n = comm.size();
  const OffloadConfig& c = setup.config;
  std::unique_ptr<LayerCompute> lc;
  ZB_RETURN_IF_ERROR(LayerCompute::create(setup.compute, *setup.model, compute, d.cpu_threads_per_rank(), &lc));
  std::unique_ptr<OffloadGrads> g;
  ZB_RETURN_IF_ERROR(OffloadGrads::create(comm, compute, *setup.model, c, &g));
  g->set_chunk_compute(lc.get());
  const double psi = double(g->layout().params);
  const size_t gsize = dtype_size(c.grad_dtype);

  Timing t;
  bool reduce_timed = true;  // whether the backend times the step's reduce-scatters (NCCL does not)
  ZB_RETURN_IF_ERROR(run.per_iteration([&]() -> Status {
    ZB_RETURN_IF_ERROR(g->step());
    const OffloadTimes& w = g->last();
    // A slot is held by its reduce-scatter and then its copy-out: compute's wait for it is
    // both, and so is the work it is held against.
    run.sample("exposed", w.exposed_s + w.exposed_comm_s);
    run.sample("exposed_comm", w.exposed_comm_s);
    run.sample("tail", w.tail_s);
    reduce_timed = !std::isnan(w.reduce_s);
    run.sample("copy", w.copies.d2h_s + w.copies.host_s + (reduce_timed ? w.reduce_s : 0.0));
    // Bandwidths: the slowest rank's.
    run.sample("d2h", w.copies.d2h_bytes / w.copies.d2h_s / 1e9, Worst::min);
    run.sample("h2d", w.copies.h2d_bytes / w.copies.h2d_s / 1e9, Worst::min);
    // Each add reads the shard and the copied block and writes the shard.
    const double added = 3.0 * double(g->layout().shard()) * double(gsize) * (c.microbatches - 1);
    run.sample("adds", c.microbatches > 1 ? added / w.copies.host_s / 1e9 : 0.0, Worst::min);
    return Status::ok();
  }, &t));
  run.report(t);
  out->step_s = t.median_s;
  out->exposed_s = t.side("exposed");
  out->tail_s = t.side("tail");
  out->exposed_comm_s = t.side("exposed_comm");
  out->d2h_GBps = t.side("d2h");
  out->h2d_GBps = t.side("h2d");
  out->accumulate_GBps = c.microbatches > 1 ? t.side("adds") : NAN;  // with one, nothing was added

  if (!setup.trace_path.empty()) {
    const std::string meta = "\"benchmark\": \"offload_grads\", \"ranks\": " + std::to_string(n) +
                             ", \"slots\": " + std::to_string(c.slots) + ", \"microbatches\": " +
                             std::to_string(c.microbatches) + ", \"chunks\": " + std::to_string(c.chunks);
    ZB_RETURN_IF_ERROR(write_trace(d, g->trace(), g->engine(), setup.trace_path, [&] { return g->step(); }, meta));
  }
  if (setup.check) {
    std::vector<Segment> segs = g->check_segments();
    CheckState got, want;
    ZB_RETURN_IF_ERROR(g->state_to_host(segs, &got));
    StageConfig ref;
    ref.optimizer = c.optimizer;
    ref.grad_dtype = c.grad_dtype;
    ZB_RETURN_IF_ERROR(reference_state(ref, n * c.microbatches, g->steps_done(), segs, g->optimizer_compute(), &want));
    out->wrong = d.sum_over_ranks(double(count_mismatches(got, want)));
  } else {
    out->wrong = NAN;  // not checked
  }

  // Alone, each its median: the chunk's compute, and the chunk's reduce-scatter, copy and add,
  // whose sum is the compute per chunk above which a second slot hides them.
  Timing alone;
  ZB_RETURN_IF_ERROR(run.per_iteration([&]() -> Status {
    ZB_RETURN_IF_ERROR(lc->forward(0));
    return compute.synchronize();
  }, &alone));
  out->compute_per_chunk_s = alone.median_s;
  double condition = 0;
  double reduce_alone_s = 0;
  for (auto part : {&OffloadGrads::reduce_alone, &OffloadGrads::copy_alone, &OffloadGrads::accumulate_alone}) {
    ZB_RETURN_IF_ERROR(run.per_iteration([&] { return (g.get()->*part)(); }, &alone));
    if (part == &OffloadGrads::reduce_alone) reduce_alone_s = alone.median_s;
    condition += alone.median_s;
  }
  out->hide_condition_s = condition;
  // The step's reduce-scatters as the backend timed them; where it does not (NCCL), each
  // fill's counts as the largest chunk's alone (a constant, which the worst rank and the
  // median carry through unchanged).
  out->copy_s = t.side("copy") + (reduce_timed ? 0.0 : reduce_alone_s * c.microbatches * c.chunks);
  out->hidden_frac = 1.0 - out->exposed_s / out->copy_s;
  ZB_RETURN_IF_ERROR(copy_limits(run, compute.kind(), g->largest_block() * gsize, out));
  out->limit = out->limit_d2h;

  out->device_per_param = d.max_over_ranks(double(g->measured_device_bytes()) / psi);
  out->device_formula = double(c.slots) * double(g->slot_bytes()) / psi;
  out->host_per_param = d.max_over_ranks(double(g->measured_host_bytes()) / psi);
  run.state().SetLabel(copy_label(compute.kind()));
  run.counter("ranks", n);
  run.counter("params", psi);
  run.counter("microbatches", c.microbatches);
  run.counter("chunks", c.chunks);
  run.counter("chunk_bytes", double(g->slot_bytes()));
  run.counter("host_bytes_per_param_accounted", g->host_state_bytes() / psi);
  run.counter("tail_copy_s", out->tail_s);
  run.counter("exposed_comm_s", out->exposed_comm_s);
  common_counters(run, *out, c.slots);
  return Status::ok();
}

Status run_offload_weights(Run& run, Compute& compute, const OffloadBenchSetup& setup, OffloadResult* out) {
  Driver& d = run.driver();
  std::unique_ptr<LayerCompute> lc;
  ZB_RETURN_IF_ERROR(LayerCompute::create(setup.compute, *setup.model, compute, d.cpu_threads_per_rank(), &lc));
  std::unique_ptr<OffloadWeights> w;
  const OffloadConfig& c = setup.config;
  ZB_RETURN_IF_ERROR(OffloadWeights::create(compute, *setup.model, c.slots, c.corrupt, &w));
  w->set_layer_compute(lc.get());
  const double psi = double(w->params());

  Timing t;
  ZB_RETURN_IF_ERROR(run.per_iteration([&]() -> Status {
    ZB_RETURN_IF_ERROR(w->step());
    run.sample("exposed", w->last().exposed_s);
    run.sample("head", w->last().head_s);
    run.sample("copy", w->last().copies.h2d_s);
    run.sample("h2d", w->last().copies.h2d_bytes / w->last().copies.h2d_s / 1e9, Worst::min);
    return Status::ok();
  }, &t));
  run.report(t);
  out->step_s = t.median_s;
  out->exposed_s = t.side("exposed");
  const double head_s = t.side("head");
  out->copy_s = t.side("copy");
  out->h2d_GBps = t.side("h2d");
  out->hidden_frac = 1.0 - out->exposed_s / out->copy_s;
  if (!setup.trace_path.empty()) {
    const std::string meta = "\"benchmark\": \"offload_weights\", \"ranks\": " + std::to_string(d.size()) +
                             ", \"slots\": " + std::to_string(c.slots) + ", \"layers\": " +
                             std::to_string(setup.model->layers.size());
    ZB_RETURN_IF_ERROR(write_trace(d, w->trace(), w->engine(), setup.trace_path, [&] { return w->step(); }, meta));
  }
  if (setup.check) {
    ZB_RETURN_IF_ERROR(w->step(true));
    out->wrong = d.sum_over_ranks(double(w->last_mismatches()));
  } else {
    out->wrong = NAN;
  }
  Timing alone;
  ZB_RETURN_IF_ERROR(run.per_iteration([&]() -> Status {
    ZB_RETURN_IF_ERROR(lc->forward(0));
    return compute.synchronize();
  }, &alone));
  out->compute_per_chunk_s = alone.median_s;
  ZB_RETURN_IF_ERROR(run.per_iteration([&] { return w->copy_alone(); }, &alone));
  out->hide_condition_s = alone.median_s;
  ZB_RETURN_IF_ERROR(copy_limits(run, compute.kind(), w->slot_bytes(), out));
  out->limit = out->limit_h2d;
  out->device_per_param = d.max_over_ranks(double(w->measured_device_bytes()) / psi);
  out->device_formula = double(c.slots) * double(w->slot_bytes()) / psi;
  out->host_per_param = d.max_over_ranks(double(w->measured_host_bytes()) / psi);
  run.state().SetLabel(copy_label(compute.kind()));
  run.counter("ranks", d.size());
  run.counter("params", psi);
  run.counter("layers", double(setup.model->layers.size()));
  run.counter("chunk_bytes", double(w->slot_bytes()));
  run.counter("head_copy_s", head_s);
  common_counters(run, *out, c.slots);
  return Status::ok();
}

}  // namespace zb
