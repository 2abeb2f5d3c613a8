// The zb_predict benchmark body: one stage's step recorded on the recording backend and
// replayed against a measured collective sweep.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "harness/comm/topology.h"
#include "harness/driver/driver.h"
#include "harness/pipeline/pipeline_step.h"
#include "harness/predict/explain.h"
#include "harness/predict/kernel_rates.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"
#include "harness/stage/layer_compute.h"
#include "harness/zero/zero_step.h"

namespace zb {

struct PredictSetup {
  const ModelSpec* model = nullptr;
  const Sweep* sweep = nullptr;
  const Tiers* tiers = nullptr;  // the sweep's links per tier
  ZeroConfig config;
  // A pipeline stage's step (zb_pipeline) instead of the ZeRO step, when set.
  bool pipeline = false;
  PipelineConfig pipeline_config;
  ComputeSpec compute;  // none, sleep or spin: a layer's forward; backward twice as long
  Topology topo;  // the modelled ranks and nodes
  std::string trace_path;  // the predicted step as a Chrome trace, when set
  // The inter-node links at this rate (Gbit/s) when finite (--link-gbps), else as swept.
  double link_gbps = NAN;
  // required_link_gbps: the exposed communication's largest share of the step.
  double exposed_limit = kDefaultExposedLimit;
  // The measured counters of the zb_zero benchmark of the same name (from --measured), to
  // report the prediction's error beside it; null when not given or not found.
  const std::map<std::string, double>* measured = nullptr;
  // --explain: the measured step's trace of this stage, lined up against the prediction.
  std::string explain_trace;
  // The quantization kernels' rates (--kernels), for a quantized configuration.
  const KernelRates* kernels = nullptr;
};

struct PredictOutcome {
  StepPrediction p;
  double required_link_gbps = NAN;
  // The exposed time's relative change per relative change of every collective's time.
  double exposed_per_comm = NAN;
  // A quantized configuration: the rate below which it beats its stage unquantized.
  double beats_unquantized_below_gbps = NAN;
  std::string explanation;  // --explain's table and its causes
};

// Sets the counters of `run` and reports the predicted step as its time.
Status run_predict_benchmark(Run& run, const PredictSetup& setup, PredictOutcome* out);

}  // namespace zb
