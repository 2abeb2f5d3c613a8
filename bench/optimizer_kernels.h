// zb_optimizer's kernel benchmark: one kernel (an optimizer update, a quantization) against the
// fastest bandwidth probe of the same memory, both measured in the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "harness/compute/compute.h"
#include "harness/driver/driver.h"

namespace zb {

struct KernelResult {
  double kernel_s = 0;  // median call of the alternating rounds
  double gbps = 0, limit_gbps = 0, frac = 0, params_per_s = 0;
  double rank_spread = 0;  // 1 - the fastest rank's median time / the slowest rank's
  double side_by_side_s = 0;  // mean of the loop where every rank runs it back to back at once
  std::string limit_pattern;
};

// A kernel as the limit sees it: one call, complete when it returns (synchronized on a GPU),
// over `elements` elements; the bytes of the arrays it touches (the probes' arrays are as large
// in total, so both meet the same caches and the same memory), and its byte model, the bytes
// per element its GB/s counts.
struct KernelUnderTest {
  std::function<Status()> call;
  uint64_t elements = 0;
  size_t footprint_bytes = 0;
  double bytes_per_element = 0;
};

// Times `k` (Google Benchmark's time), then `k` and every bandwidth probe alternating round by
// round, and reports GB/s by the byte model against the best probe. Counters: params (the
// elements), bytes_per_param_moved, kernel_s, params_per_s, GBps, limit_GBps, frac_of_limit,
// each probe's <pattern>_GBps, ranks, threads, rank_spread and side_by_side_s.
Status kernel_against_limit(Run& run, Compute& compute, const KernelUnderTest& k, KernelResult* out);

// One optimizer update over `params` elements against the limit.
Status kernel_benchmark(Run& run, Compute& compute, const OptimizerConfig& opt, DType grad,
                        uint64_t params, KernelResult* out);

// The synthetic backward's gradient kernel (what zb_zero's backward writes besides --compute)
// over `params` elements against the limit: it reads the BF16 weights and writes the gradient.
Status synthetic_grad_benchmark(Run& run, Compute& compute, DType grad, uint64_t params, KernelResult* out);

}  // namespace zb
