// The names of zb_zero's and zb_pipeline's benchmarks, built once, so zb_predict's predictions
// carry exactly the names of the benchmarks they predict and the two results files pair up.
#pragma once

#include <string>

#include "harness/compute/optimizer_config.h"
#include "harness/pipeline/pipeline_schedule.h"
#include "harness/stage/model.h"
#include "harness/stage/stage.h"

namespace zb {

inline std::string model_segments(const ModelSpec& model, Optimizer optimizer, DType grad) {
  return "/params:" + std::to_string(model.params()) + "/layers:" + std::to_string(model.layers.size()) +
         "/optimizer:" + optimizer_name(optimizer) + "/grad:" + dtype_name(grad);
}

// /quantize_weights:W/quantize_grads:G, each where the stage quantizes it beyond its own row
// (zpp's quantization is its name's).
inline std::string quantize_segments(Stage stage, const Quantization& q) {
  const StageModel& m = stage_model(stage);
  if (m.quantized()) return "";
  const Quantization e = m.effective(q);
  std::string out;
  if (e.weights != WeightQuant::none) out += std::string("/quantize_weights:") + weight_quant_name(e.weights);
  if (e.grads != GradQuant::none) out += std::string("/quantize_grads:") + grad_quant_name(e.grads);
  return out;
}

// zero/stage:S[/quantize_weights:W][/quantize_grads:G]/params:../layers:../optimizer:../grad:../compute:C/overlap:on|off
inline std::string zero_benchmark_name(Stage stage, const ModelSpec& model, Optimizer optimizer, DType grad,
                                       const std::string& compute, bool overlap, const Quantization& q = {}) {
  return std::string("zero/stage:") + stage_name(stage) + quantize_segments(stage, q) +
         model_segments(model, optimizer, grad) + "/compute:" + compute + "/overlap:" + (overlap ? "on" : "off");
}

// pipeline/stage:S/params:../layers:../microbatches:M/chunks:C/pp:P/pp_rank:p/optimizer:../grad:../compute:C
inline std::string pipeline_benchmark_name(Stage stage, const ModelSpec& model, const PipelineShape& shape,
                                           Optimizer optimizer, DType grad, const std::string& compute) {
  return std::string("pipeline/stage:") + stage_name(stage) + "/params:" + std::to_string(model.params()) +
         "/layers:" + std::to_string(model.layers.size()) + "/microbatches:" + std::to_string(shape.microbatches) +
         "/chunks:" + std::to_string(shape.chunks) + "/pp:" + std::to_string(shape.stages) +
         "/pp_rank:" + std::to_string(shape.rank) + "/optimizer:" + optimizer_name(optimizer) +
         "/grad:" + dtype_name(grad) + "/compute:" + compute;
}

}  // namespace zb
