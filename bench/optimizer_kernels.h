// zb_optimizer's kernel benchmark: one update kernel against the fastest bandwidth probe of
// the same memory, both measured in the same run.
#pragma once

#include <cstdint>
#include <string>

#include "harness/compute/compute.h"
#include "harness/driver/driver.h"

namespace zb {

struct KernelResult {
  double kernel_s = 0;  // median update of the alternating rounds
  double gbps = 0, limit_gbps = 0, frac = 0, params_per_s = 0;
  std::string limit_pattern;
};

Status kernel_benchmark(Run& run, Compute& compute, const OptimizerConfig& opt, DType grad,
                        uint64_t params, KernelResult* out);

}  // namespace zb
