// What every step schedule is configured with (the stage, the optimizer, the gradients' type,
// the test fault) and what a step runs; the schedules' own configurations add to it.
#pragma once

#include "harness/compute/optimizer_config.h"
#include "harness/core/dtype.h"
#include "harness/stage/stage.h"

namespace zb {

struct StageConfig {
  Stage stage = Stage::dp;
  OptimizerConfig optimizer;
  DType grad_dtype = DType::bf16;
  bool corrupt = false;  // test only: one gradient element off in the first step
  // What to quantize where the stage can (StageModel::effective): --quantize-weights and
  // --quantize-grads. zpp quantizes as its row says whatever this holds.
  Quantization quant;
};

// What a step runs: everything, or one side alone (to time compute and communication
// separately; the state is then meaningless).
enum class StepMode { full, compute_only, comm_only };

}  // namespace zb
