// The zb_zero benchmark body: one stage's step timed with compute and communication
// together and apart, its volume, memory and final state checked, and a trace.
#pragma once

#include <string>

#include "harness/driver/driver.h"
#include "harness/stage/layer_compute.h"
#include "harness/zero/zero_step.h"

namespace zb {

struct ZeroBenchSetup {
  const ModelSpec* model = nullptr;
  ZeroConfig config;
  ComputeSpec compute;
  bool check = true;        // compare with the single-process reference
  bool split = true;        // also time compute alone and communication alone
  std::string trace_path;   // one traced step written here when set
  bool trace_comm_only = false;  // that step with communication alone (the round comm_s times)
  bool measure_wire = false;
};

struct ZeroResult {
  double step_s = 0, comm_s = NAN, compute_s = NAN, exposed_s = NAN, exposed_diff_s = NAN;
  double overlap = NAN;
  // Exposed communication by cause (medians of the worst rank's parts) and the rank most often
  // late; NaN and -1 where the engine's stream waits (GPU compute other than sleep).
  double skew_wait_s = NAN, wire_wait_s = NAN;
  int late_rank = -1;
  double late_finish_wait_s = NAN;  // of wire_wait_s: after another rank had finished it
  double volume_accounted = 0, volume_measured = NAN;
  double per_param_measured = 0, per_param_accounted = 0, formula = 0, wrong = 0;
  // Per step: volume by whether the group spans nodes, and the bytes the busiest node sent
  // to other nodes (and among its own ranks), accounted and measured at the node's devices.
  double volume_intra = 0, volume_inter = 0;
  double inter_accounted = 0, inter_measured = NAN, intra_accounted = 0, intra_measured = NAN;
  // Quantized configurations: the quantization kernels' time per step (median of the slowest
  // rank's), and the final weights' error against the unquantized reference, relative to the
  // reference weights' RMS: largest, RMS, and the largest the bound allows.
  double quantize_s = NAN, error_max = NAN, error_rms = NAN, error_bound = NAN;
};

// Runs the benchmark and sets its counters on `run`.
Status run_zero_benchmark(Run& run, Compute& compute, const ZeroBenchSetup& setup, ZeroResult* out);

}  // namespace zb
