// zb_optimizer's step benchmark: the optimizer step of a ZeRO stage (reduce, update, gather),
// run by the ZeRO step itself part by part, timed, and checked bit for bit.
#pragma once

#include <cstdint>

#include "harness/compute/compute.h"
#include "harness/driver/driver.h"
#include "harness/zero/zero_step.h"

namespace zb {

// The stage, optimizer, gradients' type and test fault (StageConfig), and the step's size.
struct StepSetup : StageConfig {
  uint64_t params = 0;
  int buckets = 1;        // the reduction and the gather run as this many collectives
  bool check = true;
};

struct StepResult {
  double reduce_s = 0, update_s = 0, gather_s = 0, step_s = 0, wrong = 0;
  uint64_t padding = 0;
};

// Kept small so the reference stays cheap; >= 2 so a wrong gather feeds a wrong gradient.
constexpr int64_t kCheckSteps = 3;

Status run_step_benchmark(Run& run, Compute& compute, const StepSetup& setup, StepResult* out);

}  // namespace zb
