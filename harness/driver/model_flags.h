// The model-and-stage flag group: --params, --layers, --model, --bucket-mb, --optimizer,
// --grad-dtype, --stages, --chunks, --quantize-weights and --quantize-grads, declared once with
// one name, type, range and help text each, for every program that builds a model (zb_zero,
// zb_pipeline, zb_offload, zb_predict, zb_plan); each program picks the members it takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/compute/optimizer_config.h"
#include "harness/driver/flags.h"
#include "harness/stage/model.h"
#include "harness/stage/stage.h"
#include "harness/zero/zero_step.h"

namespace zb {

// What a program takes of the group (--params, --optimizer and --grad-dtype always), and its
// defaults.
struct ModelFlagSpec {
  bool layers = true;          // --layers and --model: a model of layers (zb_plan: a count alone)
  bool bucket = true;          // --bucket-mb
  bool stages = true;          // --stages
  bool chunks = false;         // --chunks
  // --quantize-weights and --quantize-grads, and the quantized stages (zpp) in --stages' choices.
  bool quantize = false;
  uint64_t params = 16000000;  // 0: no default, --params is required
  double bucket_mb = 25;       // 0: no bucket (a whole chunk), and 0 is then allowed
  int64_t chunks_default = 1;
  std::vector<Stage> stage_set = all_stages();  // what --stages may name, and its default
  std::string params_help = "parameters of the model, split over --layers equal layers";
  std::string bucket_help = "gradient bucket size in MiB of gradients";
  std::string stages_help = "stages to run";
};

// The model and the step configuration the flags give.
struct ModelSetup {
  ModelSpec model;  // empty where the program takes no layers
  ZeroConfig step;  // optimizer, gradient dtype and bucket (stage: the first of stages)
  std::vector<Stage> stages;
  int chunks = 1;
  uint64_t params = 0;  // --params as given (the model's own count may differ: --model)
  double bucket_mb = 0;
  std::vector<WeightQuant> quantize_weights{WeightQuant::none};
  std::vector<GradQuant> quantize_grads{GradQuant::none};
  // The configurations of `stage` the quantize lists ask for, each once: every combination of
  // a listed value per kind, as the stage takes it (StageModel::effective), in list order.
  std::vector<Quantization> quantizations(Stage stage) const;
};

// Registers the group on `flags` in its constructor; lives as long as the flags (they write
// into it).
class ModelFlags {
 public:
  ModelFlags(Flags& flags, ModelFlagSpec spec);
  ModelFlags(const ModelFlags&) = delete;
  ModelFlags& operator=(const ModelFlags&) = delete;
  // After the flags are parsed: the model (from --model, or --params over --layers equal
  // layers) and the step configuration; a bad value is one line.
  Status resolve(ModelSetup* out) const;

 private:
  ModelFlagSpec spec_;
  uint64_t params_;
  int64_t layers_ = 16, chunks_;
  std::string model_;
  double bucket_mb_;
  Optimizer optimizer_ = Optimizer::adam;
  DType grad_dtype_ = DType::bf16;
  std::vector<Stage> stages_;
  std::vector<WeightQuant> quantize_weights_{WeightQuant::none};
  std::vector<GradQuant> quantize_grads_{GradQuant::none};
};

}  // namespace zb
