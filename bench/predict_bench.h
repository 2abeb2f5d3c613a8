// The zb_predict benchmark body: one stage's step recorded on the recording backend and
// replayed against a measured collective sweep.
#pragma once

#include <map>
#include <string>

#include "harness/comm/topology.h"
#include "harness/driver/driver.h"
#include "harness/pipeline/pipeline_step.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/stage/layer_compute.h"
#include "harness/zero/zero_step.h"

namespace zb {

struct PredictSetup {
  const ModelSpec* model = nullptr;
  const Sweep* sweep = nullptr;
  ZeroConfig config;
  // A pipeline stage's step (zb_pipeline) instead of the ZeRO step, when set.
  bool pipeline = false;
  PipelineConfig pipeline_config;
  ComputeSpec compute;  // none, sleep or spin: a layer's forward; backward twice as long
  Topology topo;  // the modelled ranks and nodes
  std::string trace_path;  // the predicted step as a Chrome trace, when set
  // The measured counters of the zb_zero benchmark of the same name (from --measured), to
  // report the prediction's error beside it; null when not given or not found.
  const std::map<std::string, double>* measured = nullptr;
};

// Sets the counters of `run` and reports the predicted step as its time.
Status run_predict_benchmark(Run& run, const PredictSetup& setup, StepPrediction* out);

}  // namespace zb
