// The model-and-stage flag group: declaration, and the model and step it gives.
#include "harness/driver/model_flags.h"

#include <algorithm>

namespace zb {

ModelFlags::ModelFlags(Flags& flags, ModelFlagSpec spec)
    : spec_(std::move(spec)),
      params_(spec_.params),
      chunks_(spec_.chunks_default),
      bucket_mb_(spec_.bucket_mb),
      stages_(spec_.stage_set) {
  flags.add_count("params", &params_, spec_.params_help, 1, uint64_t(1e18));
  if (spec_.layers) {
    flags.add_int("layers", &layers_, "layers of the uniform model", 1, 1 << 20);
    flags.add_string("model", &model_, "gpt:layers=L,hidden=H,vocab=V (real, unequal layer sizes)");
  }
  if (spec_.bucket)
    flags.add_double("bucket-mb", &bucket_mb_, spec_.bucket_help, spec_.bucket_mb > 0 ? 1e-6 : 0,
                     1 << 20);
  flags.add_choice("optimizer", &optimizer_,
                   "adam (12 bytes of state per parameter) or momentum (8)", optimizer_choices());
  flags.add_choice("grad-dtype", &grad_dtype_, "gradient dtype", dtype_choices());
  if (spec_.stages) {
    Choices<Stage> choices;
    for (Stage s : spec_.stage_set) choices.push_back({stage_name(s), s});
    if (spec_.quantize)
      for (Stage s : table_stages())
        if (stage_model(s).quantized()) choices.push_back({stage_name(s), s});
    flags.add_list("stages", &stages_, spec_.stages_help, choices);
  }
  if (spec_.quantize) {
    flags.add_list("quantize-weights", &quantize_weights_,
                   "none, int8 (ZeRO++'s qwZ: blocks of 4096 with an FP32 scale each) or fp8 (E4M3, one scale "
                   "per layer, as torchtitan), or a list: how z3 and hpz gather their weights (one benchmark "
                   "per value)",
                   weight_quant_choices());
    flags.add_list("quantize-grads", &quantize_grads_,
                   "none, int8 or int4 (ZeRO++'s qgZ: blocks of 4096, an all-to-all within the node then one "
                   "across nodes in place of the reduce-scatter), or a list: how z2, z3 and hpz reduce their "
                   "gradients (one benchmark per value)",
                   grad_quant_choices());
  }
  if (spec_.chunks)
    flags.add_int(
        "chunks", &chunks_,
        "model chunks per rank: the rank's layers cut into this many consecutive groups (a "
        "pipeline rank runs them interleaved; an offload slot holds one at a time)",
        1, 4096);
}

Status ModelFlags::resolve(ModelSetup* out) const {
  ModelSetup m;
  if (spec_.params == 0 && params_ == 0)
    return Status::error("needs --params=N (e.g. --params=7e9)");
  if (spec_.layers) ZB_RETURN_IF_ERROR(make_model(model_, double(params_), layers_, &m.model));
  m.params = params_;
  m.bucket_mb = bucket_mb_;
  m.step.optimizer.kind = optimizer_;
  m.step.grad_dtype = grad_dtype_;
  m.step.bucket_elems = bucket_elems(bucket_mb_, grad_dtype_);
  m.stages = stages_;
  if (!m.stages.empty()) m.step.stage = m.stages.front();
  m.chunks = int(chunks_);
  m.quantize_weights = quantize_weights_;
  m.quantize_grads = quantize_grads_;
  // A value asked for that no stage of --stages can take is a mistake, not a no-op.
  auto takes = [&](bool (StageModel::*can)() const) {
    std::string who;
    for (Stage s : table_stages())
      if ((stage_model(s).*can)() && !stage_model(s).quantized()) who += std::string(who.empty() ? "" : ", ") + stage_name(s);
    for (Stage s : m.stages)
      if ((stage_model(s).*can)() && !stage_model(s).quantized()) return std::string();
    return who;
  };
  for (WeightQuant q : m.quantize_weights)
    if (q != WeightQuant::none && !takes(&StageModel::can_quantize_weights).empty())
      return Status::error(std::string("--quantize-weights=") + weight_quant_name(q) + " applies to " +
                           takes(&StageModel::can_quantize_weights) + " (the gathers of weights sharded over all "
                           "ranks); --stages names none of them");
  for (GradQuant q : m.quantize_grads)
    if (q != GradQuant::none && !takes(&StageModel::can_quantize_grads).empty())
      return Status::error(std::string("--quantize-grads=") + grad_quant_name(q) + " applies to " +
                           takes(&StageModel::can_quantize_grads) + " (the reductions of gradients sharded over "
                           "all ranks); --stages names none of them");
  *out = std::move(m);
  return Status::ok();
}

std::vector<Quantization> ModelSetup::quantizations(Stage stage) const {
  std::vector<Quantization> out;
  for (WeightQuant w : quantize_weights)
    for (GradQuant g : quantize_grads) {
      const Quantization q = stage_model(stage).effective({w, g});
      if (std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
    }
  return out;
}

}  // namespace zb
