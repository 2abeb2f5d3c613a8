// zb_offload: gradients out and weights in through 1, 2 or 3 device slots. Device memory
// (measured against slots x chunk bytes), host memory, copy bandwidth against a copy alone,
// the time compute waits for a slot, the fraction of copy time hidden, and a bit-exact check.
#include <cmath>
#include <cstdio>

#include "bench/offload_bench.h"
#include "harness/core/files.h"
#include "harness/core/parse.h"
#include "harness/core/stats.h"
#include "harness/driver/driver.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"

namespace {

enum class Family { grads, weights };

struct Options {
  int64_t microbatches = 4;
  std::string compute = "none", sweep, trace;
  std::vector<int64_t> slots = {1, 2, 3};
  std::vector<Family> families = {Family::grads, Family::weights};
  bool optimizer_on_host = true, check = true;
};

struct Row {
  std::string family;
  int slots;
  std::string compute;
  zb::OffloadResult r;
};

zb::Status parse_sweep(const std::string& text, std::vector<double>* out) {
  if (text.empty()) return zb::Status::ok();
  for (const std::string& item : zb::split(text, ',')) {
    double us = 0;
    if (!zb::parse_double(item, &us) || us < 0 || us > 1e8)
      return zb::Status::error("--compute-sweep: '" + item + "' is not a number of microseconds in [0, 1e8]");
    out->push_back(us);
  }
  return zb::Status::ok();
}

void print_table(const std::vector<Row>& rows) {
  zb::Table table({"benchmark", "slots", "compute", "device B/param formula", "measured", "host B/param",
                   "d2h GB/s", "h2d GB/s", "limit GB/s", "add GB/s", "copy(ms)", "exposed(ms)", "hidden",
                   "step(ms)", "compute/chunk(ms)", "condition(ms)", "wrong"});
  for (const auto& [family, slots, compute, r] : rows)
    table.add_row({family, std::to_string(slots), compute, zb::fmt(r.device_formula, 4), zb::fmt(r.device_per_param, 4),
                   zb::fmt(r.host_per_param, 3), zb::fmt(r.d2h_GBps, 2), zb::fmt(r.h2d_GBps, 2), zb::fmt(r.limit, 2),
                   zb::fmt(r.accumulate_GBps, 2), zb::fmt(r.copy_s * 1e3, 3), zb::fmt(r.exposed_s * 1e3, 3),
                   zb::fmt(r.hidden_frac, 3), zb::fmt(r.step_s * 1e3, 2), zb::fmt(r.compute_per_chunk_s * 1e3, 3),
                   zb::fmt(r.hide_condition_s * 1e3, 3), zb::fmt(r.wrong, 0)});
  table.print(stdout);
}

// Beside a sweep: per family and slot count, the hide condition, and the smallest swept
// compute per chunk at which the copies hid (hidden_frac >= 0.9).
void print_sweep(const std::vector<Row>& rows, const std::vector<int64_t>& slots) {
  for (const char* family : {"offload_grads", "offload_weights"})
    for (int64_t s64 : slots) {
      const int s = int(s64);
      double reached = NAN;
      std::vector<double> conditions;  // measured beside every point: their median
      for (const auto& row : rows) {
        if (row.family != family || row.slots != s) continue;
        conditions.push_back(row.r.hide_condition_s);
        if (row.r.hidden_frac >= 0.9 && !(row.r.compute_per_chunk_s >= reached)) reached = row.r.compute_per_chunk_s;
      }
      if (conditions.empty()) continue;
      const double condition = zb::median(conditions);
      std::printf("# %s, %d slot(s): condition (reduce-scatter + copy + add alone, per chunk, median over the points) %s ms; copies hide "
                  "(hidden_frac >= 0.9) from compute per chunk %s\n",
                  family, s, zb::fmt(condition * 1e3, 3).c_str(),
                  std::isnan(reached) ? "not reached" : (zb::fmt(reached * 1e3, 3) + " ms").c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_offload",
                    "Gradients out and weights in through device slots: ZeRO-2's gradient shard in host memory "
                    "with S chunk-sized slots on the device, and a model in pinned host memory streamed layer by "
                    "layer through S slots. Device memory, copy bandwidth, exposed copies, hidden fraction.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  zb::ModelFlagSpec spec;
  spec.bucket = spec.stages = false;
  spec.chunks = true;
  spec.chunks_default = 4;
  zb::ModelFlags model_flags(f, spec);
  f.add_int("microbatches", &opt.microbatches, "offload_grads: micro-batches per step", 1, 4096);
  f.add_ints("slots", &opt.slots, "device slots, a count or a list (one benchmark each)", 1, 64);
  zb::Choices<Family> families{{"grads", Family::grads}, {"weights", Family::weights}};
  f.add_list("offload", &opt.families, "what goes through the slots: grads (a chunk per slot) or weights (a "
             "layer per slot)", families);
  f.add_choice("optimizer-on", &opt.optimizer_on_host, "offload_grads: where the optimizer updates the shard",
               zb::Choices<bool>{{"host", true}, {"device", false}});
  f.add_bool("check", &opt.check, "compare the final state with a single-process reference, and each loaded "
             "layer with its host copy");
  f.add_string("compute", &opt.compute, "compute per chunk (offload_grads) or per layer (offload_weights): "
               "none, sleep:US or spin:US");
  f.add_string("compute-sweep", &opt.sweep, "US,US,...: compute values (kind from --compute, sleep by default), "
               "one benchmark per slot count and value");
  f.add_string("trace", &opt.trace, "write a Chrome trace of one step of every rank here");
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;

  zb::ModelSetup ms;
  zb::ComputeSpec compute_spec;
  std::vector<double> sweep_us;
  zb::Status s = model_flags.resolve(&ms);
  if (s) s = zb::parse_compute_spec(opt.compute, &compute_spec);
  if (s && compute_spec.kind == zb::ComputeSpec::Kind::gemm)
    s = zb::Status::error("--compute=" + opt.compute + ": zb_offload takes none, sleep:US or spin:US");
  if (s) s = parse_sweep(opt.sweep, &sweep_us);
  if (s && int64_t(ms.model.layers.size()) < ms.chunks)
    s = zb::Status::error("--chunks=" + std::to_string(ms.chunks) + " is more than the model's " +
                          std::to_string(ms.model.layers.size()) + " layers");
  if (s && !opt.trace.empty()) s = zb::check_output_path("--trace", opt.trace);
  if (!s) return driver.bad_flag(s);
  driver.set_thread_progress(true);  // the step's collectives run on the communication thread
  code = driver.start();
  if (code >= 0) return code;
  zb::Communicator& comm = driver.comm();
  const zb::ModelSpec& model = ms.model;
  std::unique_ptr<zb::Compute> compute;
  s = zb::Compute::create(comm.mem_kind(), driver.cpu_threads_per_rank(), &compute);
  if (!s) driver.abort_job(s);

  // Points: the compute given, or each swept value with the given kind (sleep for none).
  std::vector<std::pair<std::string, zb::ComputeSpec>> points;
  if (sweep_us.empty()) points.push_back({opt.compute, compute_spec});
  for (double us : sweep_us) {
    zb::ComputeSpec p = compute_spec;
    if (p.kind != zb::ComputeSpec::Kind::spin) p.kind = zb::ComputeSpec::Kind::sleep;
    p.seconds = us * 1e-6;
    p.text = std::string(p.kind == zb::ComputeSpec::Kind::spin ? "spin:" : "sleep:") + zb::fmt(us, 0);
    points.push_back({p.text, p});
  }
  const size_t runs = opt.families.size() * opt.slots.size() * points.size();
  std::vector<Row> rows;
  const std::string shape = "/params:" + std::to_string(model.params()) + "/layers:" + std::to_string(model.layers.size());
  for (Family fam : opt.families)
    for (int64_t sl64 : opt.slots)
      for (const auto& [text, spec] : points) {
        const int sl = int(sl64);
        zb::OffloadBenchSetup setup;
        setup.model = &model;
        setup.compute = spec;
        setup.check = opt.check && sweep_us.empty();
        setup.config.optimizer = ms.step.optimizer;
        setup.config.grad_dtype = ms.step.grad_dtype;
        setup.config.microbatches = int(opt.microbatches);
        setup.config.chunks = ms.chunks;
        setup.config.slots = sl;
        setup.config.optimizer_on_host = opt.optimizer_on_host;
        setup.config.host_threads = driver.cpu_threads_per_rank();
        setup.config.corrupt = driver.faults().corrupt_rank == comm.rank();
        const std::string family = fam == Family::grads ? "offload_grads" : "offload_weights";
        const std::string tag = family.substr(8) + "_s" + std::to_string(sl) + (points.size() > 1 ? "_" + text : "");
        setup.trace_path = zb::per_stage_path(opt.trace, tag, runs);
        std::string name = family + shape;
        if (fam == Family::grads)
          name += "/microbatches:" + std::to_string(opt.microbatches) + "/chunks:" + std::to_string(ms.chunks) +
                  "/slots:" + std::to_string(sl) + "/optimizer_on:" + (opt.optimizer_on_host ? "host" : "device") +
                  "/grad:" + zb::dtype_name(ms.step.grad_dtype) + "/compute:" + text;
        else
          name += "/slots:" + std::to_string(sl) + "/compute:" + text;
        driver.add(name, [&, setup, fam, family, sl, text](zb::Run& run) -> zb::Status {
          zb::OffloadResult r;
          zb::Status st = fam == Family::grads ? zb::run_offload_grads(run, *compute, setup, &r)
                                               : zb::run_offload_weights(run, *compute, setup, &r);
          if (!st)
            return st.context("rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + ", " +
                              family + " with " + std::to_string(sl) + " slot(s)");
          if (r.wrong > 0)
            driver.mark_failed(family + " slots=" + std::to_string(sl) + ": " + zb::fmt(r.wrong, 0) +
                               (fam == Family::grads ? " final weights differ from the reference"
                                                     : " loaded weights differ from their host copy"));
          rows.push_back({family, sl, text, r});
          return zb::Status::ok();
        });
      }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    const bool gpu = comm.mem_kind() == zb::MemKind::device;
    std::printf("\n# zb_offload: %d ranks, %s, Psi = %.0f, %ld micro-batches, %d chunks, optimizer %s on the %s, "
                "%s gradients, backend %s, %s\n",
                comm.size(), model.description.c_str(), double(model.params()), long(opt.microbatches),
                ms.chunks, zb::optimizer_name(ms.step.optimizer.kind), opt.optimizer_on_host ? "host" : "device",
                zb::dtype_name(ms.step.grad_dtype), zb::backend_name(comm.backend()),
                gpu ? "copies pinned host <-> device" : "copies host-to-host (CPU ranks: no device)");
    print_table(rows);
    std::printf("# device B/param measured: %s growth around the slots; exposed: time compute waited for a slot (its reduce-scatter, then its copy); "
                "copy: reduce-scatters + copies + adds in the step; hidden = 1 - exposed / copy; condition: per chunk, those alone "
                "(weights: one layer's copy)\n", gpu ? "cudaMemGetInfo" : "resident-set");
    if (!sweep_us.empty()) print_sweep(rows, opt.slots);
  }
  return code;
}
