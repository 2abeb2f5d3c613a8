// The zb_zero benchmark body: one stage's step timed with compute and communication
// together and apart, its volume, memory and final state checked, and a trace.
#pragma once

#include <string>

#include "harness/driver.h"
#include "harness/layer_compute.h"
#include "harness/zero.h"

namespace zb {

struct ZeroBenchSetup {
  const ModelSpec* model = nullptr;
  ZeroConfig config;
  ComputeSpec compute;
  bool check = true;        // compare with the single-process reference
  bool split = true;        // also time compute alone and communication alone
  std::string trace_path;   // one traced step written here when set
  bool measure_wire = false;
};

struct ZeroResult {
  double step_s = 0, comm_s = NAN, compute_s = NAN, exposed_s = NAN, exposed_diff_s = NAN;
  double overlap = NAN;
  double volume = 0, volume_measured = NAN;
  double per_param = 0, tracked = 0, formula = 0, wrong = 0;
};

// overlap_eff = (comm - exposed) / min(comm, compute), clipped to [0, 1]: the share of the
// shorter side that ran concurrently with the other (1: fully hidden, 0: serial). It is
// IMB-NBC's (comm + compute - step) / min(comm, compute) with the step written as compute
// plus the exposed communication, which is measured directly rather than as a difference of
// two long step times.
double overlap_efficiency(double exposed_s, double comm_s, double compute_s);

// Runs the benchmark and sets its counters on `run`.
Status run_zero_benchmark(Run& run, Compute& compute, const ZeroBenchSetup& setup, ZeroResult* out);

}  // namespace zb
