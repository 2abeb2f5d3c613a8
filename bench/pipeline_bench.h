// The zb_pipeline benchmark body: one stage's pipeline step timed whole and with compute and
// communication apart, its volume, memory and final state checked, and a trace.
#pragma once

#include <cmath>
#include <string>

#include "harness/driver/driver.h"
#include "harness/pipeline/pipeline_step.h"
#include "harness/stage/layer_compute.h"

namespace zb {

struct PipelineBenchSetup {
  const ModelSpec* model = nullptr;  // the whole model; this rank runs its chunks of it
  PipelineConfig config;
  ComputeSpec compute;
  bool check = true;         // compare with the single-process reference
  bool split = true;         // also time compute alone, communication alone, one chunk's reduction
  bool measure_wire = false;
  std::string trace_path;    // one traced step written here when set
};

struct PipelineResult {
  double step_s = 0, compute_s = NAN, comm_s = NAN, exposed_s = NAN, tail_s = NAN;
  double chunk_reduce_s = NAN, gather_s = NAN, idle_s = 0;
  double volume_accounted = 0, volume_measured = NAN, volume_formula = 0, collectives = 0;
  double per_param = 0, formula = 0, grad_per_param = 0, grad_formula = 0, wrong = 0;
};

// Runs the benchmark and sets its counters on `run`.
Status run_pipeline_benchmark(Run& run, Compute& compute, const PipelineBenchSetup& setup,
                              PipelineResult* out);

}  // namespace zb
