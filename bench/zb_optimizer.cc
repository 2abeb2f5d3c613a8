// zb_optimizer: the update kernels against the memory-bandwidth limit measured in the same run,
// and the optimizer step (reduce, update, gather) of each ZeRO stage, checked bit for bit.
#include <algorithm>
#include <cstdio>

#include "harness/driver.h"
#include "harness/optimizer_bench.h"
#include "harness/sweep.h"
#include "harness/table.h"
#include "kernels/bandwidth.h"

namespace {

struct Options {
  std::vector<std::string> parts{"kernels", "step"};
  std::vector<std::string> kernels{"adam", "momentum"};
  std::vector<std::string> grads{"bf16", "fp32"};
  std::vector<std::string> stages{"dp", "z1", "z2", "z3"};
  uint64_t min_params = 1ull << 20, max_params = 0, step_params = 16ull << 20;
  double step_factor = 4;
  int64_t buckets = 1;
  bool check = true;
};

// The update's arrays per parameter (gradient, master, moments, BF16 weights): how large the
// copy's buffers are.
size_t footprint_per_param(zb::Optimizer kind, zb::DType grad) {
  return zb::dtype_size(grad) + size_t(zb::kMasterBytes + zb::moment_bytes(kind) + zb::kWeightBytes);
}

struct KernelResult {
  double kernel_s = 0;  // median update of the alternating rounds
  double gbps = 0, limit_gbps = 0, frac = 0, params_per_s = 0;
  std::string limit_pattern;
};

// One update kernel over `params` elements against the memory-bandwidth limit, measured
// inside each benchmark on the same engine with the same threads: the fastest of the
// bandwidth probes (kernels/bandwidth.h), each over arrays as large in total as the
// update's, so all of them meet the same caches and the same memory. A limit must bound
// every kernel held against it, so it is the best probe, not a chosen one.
zb::Status kernel_benchmark(zb::Run& run, zb::Compute& compute, const zb::OptimizerConfig& opt,
                            zb::DType grad, uint64_t params, KernelResult* out) {
  const zb::MemKind kind = compute.kind();
  const bool gpu = kind == zb::MemKind::device;
  const size_t n = params, gsz = zb::dtype_size(grad);
  const bool adam = opt.kind == zb::Optimizer::adam;
  const size_t footprint = n * footprint_per_param(opt.kind, grad);
  const std::vector<zb::Pattern> patterns = zb::bandwidth_patterns(gpu);
  // Every probe uses the first k of four arrays, footprint / k bytes of each: one
  // allocation of twice the footprint serves them all (see StaggeredArrays for the layout).
  const size_t probe_bytes = (footprint / 2 + 63) / 64 * 64;
  enum { kGrad, kMaster, kM, kV, kWeights };
  zb::StaggeredArrays a, probe;
  ZB_RETURN_IF_ERROR(a.allocate(kind, {n * gsz, n * 4, n * 4, adam ? n * 4 : 0, n * 2}));
  ZB_RETURN_IF_ERROR(probe.allocate(kind, {probe_bytes, probe_bytes, probe_bytes, probe_bytes}));
  void* g = a.as<void>(kGrad);
  float *master = a.as<float>(kMaster), *m = a.as<float>(kM), *v = adam ? a.as<float>(kV) : nullptr;
  zb::Bf16* w = a.as<zb::Bf16>(kWeights);
  float* arrays[4] = {probe.as<float>(0), probe.as<float>(1), probe.as<float>(2), probe.as<float>(3)};
  // Every page is written before it is timed: an untouched page reads as the shared zero page,
  // which is cached and would flatter whichever side read it.
  ZB_RETURN_IF_ERROR(compute.init_weights(master, w, n, 0));
  ZB_RETURN_IF_ERROR(compute.zero(m, n * 4));
  if (adam) ZB_RETURN_IF_ERROR(compute.zero(v, n * 4));
  ZB_RETURN_IF_ERROR(compute.synthetic_grad(w, g, grad, n, 0, 0, 1, 1));
  for (float* p : arrays) ZB_RETURN_IF_ERROR(compute.zero(p, probe_bytes));
  ZB_RETURN_IF_ERROR(compute.synchronize());

  int64_t step = 0;
  auto update = [&]() -> zb::Status {
    ZB_RETURN_IF_ERROR(compute.update(opt, g, grad, master, m, v, w, n, ++step, 1.0f));
    return compute.synchronize();
  };
  const int threads = run.driver().cpu_threads_per_rank();  // as main created `compute` with
  auto elements = [&](zb::Pattern p) { return footprint / size_t(zb::pattern_arrays(p)) / 4; };
  auto probe_run = [&](zb::Pattern p) {
    return [&, p]() -> zb::Status {
#ifdef ZB_HAVE_CUDA
      if (gpu) {
        ZB_RETURN_IF_ERROR(zb::bandwidth_cuda(p, arrays, elements(p), static_cast<cudaStream_t>(compute.stream())));
        return compute.synchronize();
      }
#endif
      zb::bandwidth_cpu(p, arrays, elements(p), threads);
      return zb::Status::ok();
    };
  };
  // Google Benchmark's time is the update alone. The ratio comes from a second loop that
  // alternates the update and every probe round by round, so a slow spell of a shared
  // machine lands on all alike. Medians rather than STREAM's best round: on a shared VM the
  // best round says more about what the neighbours were doing at that instant than about
  // the memory.
  zb::Timing tk;
  ZB_RETURN_IF_ERROR(run.per_iteration(update, &tk));
  run.report(tk);
  std::vector<zb::Run::Variant> variants{{nullptr, update, nullptr}};
  for (zb::Pattern p : patterns) variants.push_back({nullptr, probe_run(p), nullptr});
  std::vector<zb::Timing> paired;
  ZB_RETURN_IF_ERROR(run.interleaved(variants, &paired));
  out->kernel_s = paired[0].median_s;
  const size_t model = zb::update_bytes_per_param(opt.kind, grad);
  out->gbps = double(model) * double(n) / out->kernel_s / 1e9;
  for (size_t i = 0; i < patterns.size(); ++i) {
    zb::Pattern p = patterns[i];
    double gbps = double(zb::pattern_bytes_per_element(p)) * double(elements(p)) / paired[i + 1].median_s / 1e9;
    run.counter(std::string(zb::pattern_name(p)) + "_GBps", gbps);
    if (gbps > out->limit_gbps) out->limit_gbps = gbps, out->limit_pattern = zb::pattern_name(p);
  }
  out->frac = out->gbps / out->limit_gbps;
  out->params_per_s = double(n) / out->kernel_s;
  run.state().SetLabel("limit: " + out->limit_pattern);
  run.counter("ranks", run.driver().size());
  run.counter("threads", gpu ? 0 : threads);
  run.counter("params", double(n));
  run.counter("bytes_per_param_moved", double(model));
  run.counter("kernel_s", out->kernel_s);
  run.counter("params_per_s", out->params_per_s);
  run.counter("GBps", out->gbps);
  run.counter("limit_GBps", out->limit_gbps);
  run.counter("frac_of_limit", out->frac);
  return zb::Status::ok();
}

struct KernelRow {
  std::string kernel, grad;
  uint64_t params;
  KernelResult r;
};

struct StepRow {
  std::string stage, optimizer, grad;
  uint64_t params;
  zb::StepResult r;
};

bool wanted(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

void print_tables(const std::vector<KernelRow>& kernels, const std::vector<StepRow>& steps,
                  const char* impl) {
  if (!kernels.empty()) {
    zb::Table t({"kernel", "grad", "impl", "params", "time(ms)", "Gparams/s", "GB/s", "limit GB/s",
                 "limit by", "fraction"});
    for (const auto& k : kernels)
      t.add_row({k.kernel, k.grad, impl, std::to_string(k.params), zb::fmt(k.r.kernel_s * 1e3, 3),
                 zb::fmt(k.r.params_per_s / 1e9, 3), zb::fmt(k.r.gbps, 2), zb::fmt(k.r.limit_gbps, 2),
                 k.r.limit_pattern, zb::fmt(k.r.frac, 3)});
    t.print(stdout);
    std::printf("# GB/s by the kernel's byte model (Adam 28/30, momentum 20/22 bytes per parameter with "
                "BF16/FP32 gradients); limit: the fastest bandwidth probe (copy, copy_plain, triad, rmw) "
                "over arrays of the same total size\n");
  }
  if (!steps.empty()) {
    zb::Table t({"stage", "optimizer", "grad", "params", "reduce(ms)", "update(ms)", "gather(ms)",
                 "step(ms)", "wrong"});
    for (const auto& s : steps)
      t.add_row({s.stage, s.optimizer, s.grad, std::to_string(s.params), zb::fmt(s.r.reduce_s * 1e3, 3),
                 zb::fmt(s.r.update_s * 1e3, 3), zb::fmt(s.r.gather_s * 1e3, 3),
                 zb::fmt(s.r.step_s * 1e3, 3), zb::fmt(s.r.wrong, 0)});
    t.print(stdout);
    std::printf("# each part: median over steps of the slowest rank; step = reduce + update + gather\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_optimizer",
                    "Optimizer update kernels against the copy bandwidth of the same memory, and the "
                    "optimizer step of each ZeRO stage (reduce, update, gather), checked bit for bit.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  f.add_list("parts", &opt.parts, "kernels: update kernels against the copy limit; step: the optimizer "
             "step per stage", {"kernels", "step"});
  f.add_list("kernels", &opt.kernels, "optimizers, in the kernel benchmarks and in the step",
             {"adam", "momentum"});
  f.add_list("grad-dtype", &opt.grads, "gradient dtypes", {"bf16", "fp32"});
  f.add_bytes("min-params", &opt.min_params, "smallest kernel size in parameters (K, M, G: powers of "
              "1024)", 1);
  f.add_bytes("max-params", &opt.max_params, "largest kernel size; 0: 64M on CPU, 256M on GPU");
  f.add_double("step-factor", &opt.step_factor, "kernel size multiplier between steps", 1.0, 1024);
  f.add_list("stages", &opt.stages, "stages of the optimizer step", {"dp", "z1", "z2", "z3"});
  f.add_bytes("step-params", &opt.step_params, "parameters of the optimizer step", 1);
  f.add_int("buckets", &opt.buckets, "equal buckets the step reduces and gathers one collective each",
            1, 1 << 20);
  f.add_bool("check", &opt.check, "compare the step's final state with a single-process reference");
  int code = driver.init(argc, argv);
  if (code >= 0) return code;

  zb::Communicator& comm = driver.comm();
  const bool gpu = comm.mem_kind() == zb::MemKind::device;
  if (opt.max_params == 0) opt.max_params = gpu ? 256ull << 20 : 64ull << 20;
  std::string bad;
  if (opt.min_params > opt.max_params)
    bad = "--min-params (" + std::to_string(opt.min_params) + ") is larger than --max-params (" +
          std::to_string(opt.max_params) + ")";
  else if (uint64_t(opt.buckets) > opt.step_params)
    bad = "--buckets (" + std::to_string(opt.buckets) + ") exceeds --step-params (" +
          std::to_string(opt.step_params) + "): a bucket needs at least one parameter";
  if (!bad.empty()) {
    if (driver.root()) std::fprintf(stderr, "zb_optimizer: %s\n", bad.c_str());
    return 2;
  }
  std::unique_ptr<zb::Compute> compute;
  zb::Status s = zb::Compute::create(comm.mem_kind(), driver.cpu_threads_per_rank(), &compute);
  // Nothing here overlaps a collective with compute: each runs on the caller, like a bare call.
  if (s) s = comm.set_progress(zb::Progress::caller);
  if (!s) driver.abort_job(s);
  const char* impl = zb::impl_name(compute->kind());

  std::vector<KernelRow> kernel_rows;
  std::vector<StepRow> step_rows;
  zb::StepReference reference;
  // AdamW as commonly configured, so decoupled weight decay is part of what is measured.
  auto config_for = [](const std::string& kernel) {
    zb::OptimizerConfig config;
    zb::parse_optimizer(kernel, &config.kind);
    config.adam.weight_decay = 0.01f;
    return config;
  };
  auto dtype_for = [](const std::string& name) {
    zb::DType grad = zb::DType::bf16;
    zb::parse_dtype(name, &grad);
    return grad;
  };
  if (wanted(opt.parts, "kernels"))
    for (const auto& kernel : opt.kernels)
      for (const auto& grad : opt.grads)
        for (uint64_t p : zb::size_sweep(opt.min_params, opt.max_params, opt.step_factor))
          driver.add(kernel + "/params:" + std::to_string(p) + "/grad:" + grad + "/impl:" + impl,
                     [&, p, kernel, grad](zb::Run& run) -> zb::Status {
                       KernelResult r;
                       ZB_RETURN_IF_ERROR(
                           kernel_benchmark(run, *compute, config_for(kernel), dtype_for(grad), p, &r));
                       kernel_rows.push_back({kernel, grad, p, r});
                       return zb::Status::ok();
                     });
  // Stages innermost: they share one reference state per optimizer and gradient dtype.
  if (wanted(opt.parts, "step"))
    for (const auto& kernel : opt.kernels)
      for (const auto& grad : opt.grads)
        for (const auto& stage : opt.stages) {
          zb::StepSetup setup;
          zb::parse_stage(stage, &setup.stage);
          setup.optimizer = config_for(kernel);
          setup.grad_dtype = dtype_for(grad);
          setup.params = opt.step_params;
          setup.buckets = int(opt.buckets);
          setup.check = opt.check;
          setup.corrupt = driver.faults().corrupt_rank == comm.rank();
          std::string name = "opt_step/stage:" + stage + "/params:" + std::to_string(opt.step_params) +
                             "/optimizer:" + kernel + "/grad:" + grad;
          driver.add(name, [&, setup, name](zb::Run& run) -> zb::Status {
            zb::StepResult r;
            ZB_RETURN_IF_ERROR(zb::run_step_benchmark(run, *compute, setup, &reference, &r));
            if (r.wrong > 0)
              driver.mark_failed(name + ": " + zb::fmt(r.wrong, 0) + " elements differ from the reference");
            step_rows.push_back({zb::stage_name(setup.stage), zb::optimizer_name(setup.optimizer.kind),
                                 zb::dtype_name(setup.grad_dtype), setup.params, r});
            return zb::Status::ok();
          });
        }

  code = driver.run();
  if (driver.root() && (!kernel_rows.empty() || !step_rows.empty())) {
    std::printf("\n# zb_optimizer: %d ranks, backend %s, %s kernels, %d CPU threads per rank\n", comm.size(),
                zb::backend_name(comm.backend()), impl, driver.cpu_threads_per_rank());
    print_tables(kernel_rows, step_rows, impl);
    if (!step_rows.empty()) std::printf("# Wrong elements       : %s\n", code == 0 ? "0 OK" : "FAILED");
  }
  return code;
}
