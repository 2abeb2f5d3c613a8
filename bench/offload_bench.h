// The zb_offload benchmark body: gradients out and weights in through S device slots, timed
// whole, with compute's waits for a slot measured where they happen, copies alone for the
// limits and the hide condition, memory measured, and the final state checked.
#pragma once

#include <cmath>
#include <string>

#include "harness/driver/driver.h"
#include "harness/offload/offload.h"
#include "harness/stage/layer_compute.h"

namespace zb {

struct OffloadBenchSetup {
  const ModelSpec* model = nullptr;
  OffloadConfig config;
  ComputeSpec compute;      // per chunk (gradients) or per layer (weights)
  bool check = true;        // gradients: the reference's final state; weights: the loaded slots
  std::string trace_path;   // one traced step written here when set
};

struct OffloadResult {
  double step_s = 0, exposed_s = NAN, exposed_comm_s = NAN, tail_s = NAN, copy_s = NAN, hidden_frac = NAN;
  double compute_per_chunk_s = NAN, hide_condition_s = NAN;
  double device_per_param = NAN, device_formula = NAN, host_per_param = NAN;
  double d2h_GBps = NAN, h2d_GBps = NAN, accumulate_GBps = NAN;
  double limit_d2h = NAN, limit_h2d = NAN, limit_both = NAN, limit = NAN;
  double wrong = 0;
};

Status run_offload_grads(Run& run, Compute& compute, const OffloadBenchSetup& setup, OffloadResult* out);
Status run_offload_weights(Run& run, Compute& compute, const OffloadBenchSetup& setup, OffloadResult* out);

}  // namespace zb
