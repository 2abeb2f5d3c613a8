// Kernels against the memory-bandwidth limit measured in the same run; the optimizer updates.
#include "bench/optimizer_kernels.h"

#include "harness/core/staggered_arrays.h"
#include "kernels/bandwidth.h"

namespace zb {
namespace {

// The update's arrays per parameter (gradient, master, moments, BF16 weights): how large the
// probes' arrays are in total.
size_t footprint_per_param(Optimizer kind, DType grad) {
  return dtype_size(grad) + size_t(4 + moment_bytes(kind) + 2);
}

}  // namespace

// The limit is measured inside each benchmark on the same engine with the same threads: the
// fastest of the bandwidth probes (kernels/bandwidth.h), each over arrays as large in total as
// the kernel's. A limit must bound every kernel held against it, so it is the best probe, not
// a chosen one.
Status kernel_against_limit(Run& run, Compute& compute, const KernelUnderTest& k, KernelResult* out) {
  const MemKind kind = compute.kind();
  const bool gpu = kind == MemKind::device;
  const size_t footprint = k.footprint_bytes;
  const std::vector<Pattern> patterns = bandwidth_patterns(gpu);
  // Every probe uses the first p of four arrays, footprint / p bytes of each: one
  // allocation of twice the footprint serves them all (see StaggeredArrays for the layout).
  const size_t probe_bytes = (footprint / 2 + 63) / 64 * 64;
  StaggeredArrays probe;
  ZB_RETURN_IF_ERROR(probe.allocate(kind, {probe_bytes, probe_bytes, probe_bytes, probe_bytes}));
  float* arrays[4] = {probe.as<float>(0), probe.as<float>(1), probe.as<float>(2), probe.as<float>(3)};
  // Every page is written before it is timed: an untouched page reads as the shared zero page,
  // which is cached and would flatter whichever side read it.
  for (float* p : arrays) ZB_RETURN_IF_ERROR(compute.zero(p, probe_bytes));
  ZB_RETURN_IF_ERROR(compute.synchronize());

  const int threads = run.driver().cpu_threads_per_rank();  // as main created `compute` with
  auto elements = [&](Pattern p) { return footprint / size_t(pattern_arrays(p)) / 4; };
  auto probe_run = [&](Pattern p) {
    return [&, p]() -> Status {
#ifdef ZB_HAVE_CUDA
      if (gpu) {
        ZB_RETURN_IF_ERROR(bandwidth_cuda(p, arrays, elements(p), static_cast<cudaStream_t>(compute.stream())));
        return compute.synchronize();
      }
#endif
      bandwidth_cpu(p, arrays, elements(p), threads);
      return Status::ok();
    };
  };
  // Google Benchmark's time is the kernel alone. The ratio comes from a second loop that
  // alternates the kernel and every probe round by round, so a slow spell of a shared
  // machine lands on all alike. Medians rather than STREAM's best round: on a shared VM the
  // best round says more about what the neighbours were doing at that instant than about
  // the memory.
  Timing tk;
  ZB_RETURN_IF_ERROR(run.per_iteration(k.call, &tk));
  run.report(tk);
  std::vector<Run::Variant> variants{{nullptr, k.call, nullptr}};
  for (Pattern p : patterns) variants.push_back({nullptr, probe_run(p), nullptr});
  std::vector<Timing> paired;
  ZB_RETURN_IF_ERROR(run.interleaved(variants, &paired));
  const double n = double(k.elements);
  out->kernel_s = paired[0].median_s;
  out->gbps = k.bytes_per_element * n / out->kernel_s / 1e9;
  for (size_t i = 0; i < patterns.size(); ++i) {
    Pattern p = patterns[i];
    double gbps = double(pattern_bytes_per_element(p)) * double(elements(p)) / paired[i + 1].median_s / 1e9;
    run.counter(std::string(pattern_name(p)) + "_GBps", gbps);
    if (gbps > out->limit_gbps) out->limit_gbps = gbps, out->limit_pattern = pattern_name(p);
  }
  out->frac = out->gbps / out->limit_gbps;
  out->params_per_s = n / out->kernel_s;
  // What the fastest rank saves of the slowest rank's time, each at its own median: ranks run
  // the step's kernels as they run these, side by side on the host's cores, and a rank that is
  // steadily faster runs that much further ahead of the others with every kernel (zb_predict).
  // Taken from the first loop, where every rank runs this kernel back to back as every rank
  // runs the same kernels in a step. The interleaved loop's ranks, before each variant
  // started together there, drifted out of phase: one rank's kernel kept meeting another
  // rank's probe, and the spread measured the probes (4 ranks on 2 cores: 0.43 to 0.58 there,
  // 0.18 to 0.24 here).
  out->rank_spread = tk.slowest_rank_median_s > 0 ? 1 - tk.fastest_rank_median_s / tk.slowest_rank_median_s : 0;
  // The same loop's mean: the kernel's time with every rank running it at once, time slices
  // included, where the interleaved loop's ranks drift apart and each kernel runs nearly alone.
  // zb_predict prices a step's kernel between the two by how often the ranks' kernels meet
  // (4 ranks on 2 cores: the synthetic gradient 1.0 to 1.65 ms per 1e6 parameters here against
  // 0.5 to 0.55 there, and 0.54 to 0.66 in a step's backward).
  out->side_by_side_s = tk.mean_s;
  run.state().SetLabel("limit: " + out->limit_pattern);
  run.counter("ranks", run.driver().size());
  run.counter("threads", gpu ? 0 : threads);
  run.counter("params", n);
  run.counter("bytes_per_param_moved", k.bytes_per_element);
  run.counter("kernel_s", out->kernel_s);
  run.counter("params_per_s", out->params_per_s);
  run.counter("GBps", out->gbps);
  run.counter("limit_GBps", out->limit_gbps);
  run.counter("frac_of_limit", out->frac);
  run.counter("rank_spread", out->rank_spread);
  run.counter("side_by_side_s", out->side_by_side_s);
  return Status::ok();
}

Status kernel_benchmark(Run& run, Compute& compute, const OptimizerConfig& opt, DType grad,
                        uint64_t params, KernelResult* out) {
  const MemKind kind = compute.kind();
  const size_t n = params, gsz = dtype_size(grad);
  const bool adam = opt.kind == Optimizer::adam;
  enum { kGrad, kMaster, kM, kV, kWeights };
  StaggeredArrays a;
  ZB_RETURN_IF_ERROR(a.allocate(kind, {n * gsz, n * 4, n * 4, adam ? n * 4 : 0, n * 2}));
  void* g = a.as<void>(kGrad);
  float *master = a.as<float>(kMaster), *m = a.as<float>(kM), *v = adam ? a.as<float>(kV) : nullptr;
  Bf16* w = a.as<Bf16>(kWeights);
  ZB_RETURN_IF_ERROR(compute.init_weights(master, w, n, 0));
  ZB_RETURN_IF_ERROR(compute.zero(m, n * 4));
  if (adam) ZB_RETURN_IF_ERROR(compute.zero(v, n * 4));
  ZB_RETURN_IF_ERROR(compute.synthetic_grad(w, g, grad, n, 0, 0, 1, 1));
  ZB_RETURN_IF_ERROR(compute.synchronize());

  int64_t step = 0;
  KernelUnderTest k;
  k.call = [&]() -> Status {
    ZB_RETURN_IF_ERROR(compute.update(opt, g, grad, master, m, v, w, n, ++step, 1.0f));
    return compute.synchronize();
  };
  k.elements = params;
  k.footprint_bytes = n * footprint_per_param(opt.kind, grad);
  k.bytes_per_element = double(update_bytes_per_param(opt.kind, grad));
  return kernel_against_limit(run, compute, k, out);
}

Status synthetic_grad_benchmark(Run& run, Compute& compute, DType grad, uint64_t params, KernelResult* out) {
  const size_t n = params, gsz = dtype_size(grad);
  StaggeredArrays a;
  ZB_RETURN_IF_ERROR(a.allocate(compute.kind(), {n * 2, n * 4, n * gsz}));
  Bf16* w = a.as<Bf16>(0);
  void* g = a.as<void>(2);
  ZB_RETURN_IF_ERROR(compute.init_weights(a.as<float>(1), w, n, 0));
  ZB_RETURN_IF_ERROR(compute.synchronize());
  int64_t step = 0;
  KernelUnderTest k;
  k.call = [&]() -> Status {
    ZB_RETURN_IF_ERROR(compute.synthetic_grad(w, g, grad, n, 0, 0, 1, ++step));
    return compute.synchronize();
  };
  k.elements = params;
  k.footprint_bytes = n * (2 + gsz);
  k.bytes_per_element = double(2 + gsz);
  return kernel_against_limit(run, compute, k, out);
}

}  // namespace zb
