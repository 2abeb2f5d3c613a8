// The stage table: each stage's sharding rule, in one place.
#include "harness/stage/stage.h"

#include <algorithm>

namespace zb {
namespace {

constexpr Sharding kAll = Sharding::replicated, kShard = Sharding::dp_group, kNode = Sharding::node_group;

// Each stage shards one more category than the last: optimizer state (z1), then gradients
// (z2), then the weights themselves (z3). The node-aware ones: hsdp (PyTorch's HSDP, MiCS)
// is z3 within each node and plain replication across nodes; hpz (ZeRO++'s hierarchical
// partition) is z3 over everyone plus a node-sharded copy of the weights for backward. zpp is
// ZeRO++ whole: hpz's sharding, its forward gather INT8 (qwZ), its gradients INT4 (qgZ).
const StageModel kStages[] = {
    //  stage      name  article       weights grads   optimizer units   node weight copy, own quantization
    {Stage::dp, "dp", "w+g+o", kAll, kAll, kAll, UnitKind::buckets},
    {Stage::z1, "z1", "w+g+o/N", kAll, kAll, kShard, UnitKind::buckets},
    {Stage::z2, "z2", "w+(g+o)/N", kAll, kShard, kShard, UnitKind::buckets},
    {Stage::z3, "z3", "(w+g+o)/N", kShard, kShard, kShard, UnitKind::layers},
    {Stage::hsdp, "hsdp", "(w+g+o)/S", kNode, kNode, kNode, UnitKind::layers},
    {Stage::hpz, "hpz", "(w+g+o)/N+w/S", kShard, kShard, kShard, UnitKind::layers, true},
    {Stage::zpp, "zpp", "(w+g+o)/N+w/S", kShard, kShard, kShard, UnitKind::layers, true,
     {WeightQuant::int8, GradQuant::int4}},
};

}  // namespace

Quantization StageModel::effective(const Quantization& requested) const {
  if (quantized()) return own_quantization;
  Quantization q;
  if (can_quantize_weights()) q.weights = requested.weights;
  if (can_quantize_grads()) q.grads = requested.grads;
  return q;
}

std::vector<StageModel::Pass> StageModel::passes(int64_t ranks_per_node, int64_t nodes,
                                                 const Quantization& requested) const {
  const Quantization q = effective(requested);
  std::vector<Pass> out;
  const Group og = optimizer_group();
  for (int i = 0; i < all_reduces(); ++i) out.push_back({Coll::all_reduce, Group::world, 1.0, Carries::grads, "grad"});
  if (reduce_scatters() && q.grads != GradQuant::none) {
    // qgZ: the node's ranks swap their gradients' pieces and sum them, then each sends its
    // node's sum of the pieces other nodes own across: 1/S of the vector per rank.
    const double g = quant_bytes_per_element(quant_format(q.grads), kGradQuantBlock) / 2;
    const char* as = grad_quant_name(q.grads);
    if (nodes <= 1 || ranks_per_node > 1) out.push_back({Coll::all_to_all, Group::node, g, Carries::grads, as});
    if (nodes > 1) out.push_back({Coll::all_to_all, Group::cross, g / double(ranks_per_node), Carries::grads, as});
  } else if (reduce_scatters()) {
    out.push_back({Coll::reduce_scatter, og, 1.0, Carries::grads, "grad"});
  }
  if (reduces_across_nodes() && nodes > 1)
    out.push_back({Coll::all_reduce, Group::cross, 1.0 / double(ranks_per_node), Carries::grads, "grad"});
  if (shards_weights()) {
    const bool qw = q.weights != WeightQuant::none;
    const double w = qw ? quant_bytes_per_element(quant_format(q.weights), kWeightQuantBlock) / 2 : 1.0;
    const char* as = qw ? weight_quant_name(q.weights) : "bf16";
    if (q.weights == WeightQuant::fp8) out.push_back({Coll::all_gather, Group::world, 0.0, Carries::amax, "fp32", 2.0});
    out.push_back({Coll::all_gather, weight_group(), w, Carries::weights, as});
    // hpz's node copy is cut from forward's gathered (dequantized) BF16 weights.
    if (node_weight_copy) out.push_back({Coll::all_gather, Group::node, 1.0, Carries::weights, "bf16"});
    else out.push_back({Coll::all_gather, weight_group(), w, Carries::weights, as});
  } else if (all_gathers()) {
    out.push_back({Coll::all_gather, og, 1.0, Carries::weights, "bf16"});
  }
  return out;
}

double StageModel::volume_psi(int64_t ranks_per_node, int64_t nodes, const Quantization& requested) const {
  double v = 0;
  for (const Pass& p : passes(ranks_per_node, nodes, requested)) v += (p.op == Coll::all_reduce ? 2.0 : 1.0) * p.psi;
  return v;
}

const StageModel& stage_model(Stage stage) {
  for (const StageModel& m : kStages)
    if (m.stage == stage) return m;
  return kStages[0];  // unreachable: every Stage has an entry
}

Stage unquantized_stage(Stage stage) {
  const StageModel& m = stage_model(stage);
  for (Stage s : all_stages()) {
    const StageModel& t = stage_model(s);
    if (t.weights == m.weights && t.grads == m.grads && t.optimizer == m.optimizer && t.units == m.units &&
        t.node_weight_copy == m.node_weight_copy && !t.quantized())
      return s;
  }
  return stage;
}

const char* stage_name(Stage stage) { return stage_model(stage).name; }

const std::vector<Stage>& all_stages() {
  static const std::vector<Stage> stages = [] {
    std::vector<Stage> out;
    for (const StageModel& m : kStages)
      if (!m.quantized()) out.push_back(m.stage);
    return out;
  }();
  return stages;
}

const std::vector<Stage>& table_stages() {
  static const std::vector<Stage> stages = [] {
    std::vector<Stage> out;
    for (const StageModel& m : kStages) out.push_back(m.stage);
    return out;
  }();
  return stages;
}

std::string config_label(Stage stage, const Quantization& requested) {
  const StageModel& m = stage_model(stage);
  std::string out = m.name;
  if (m.quantized()) return out;
  const Quantization q = m.effective(requested);
  if (q.weights != WeightQuant::none) out += std::string("+qw:") + weight_quant_name(q.weights);
  if (q.grads != GradQuant::none) out += std::string("+qg:") + grad_quant_name(q.grads);
  return out;
}

std::string config_file_label(Stage stage, const Quantization& requested) {
  std::string label = config_label(stage, requested);
  std::replace(label.begin(), label.end(), ':', '_');
  return label;
}

const std::vector<std::string>& stage_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const StageModel& m : kStages) out.push_back(m.name);
    return out;
  }();
  return names;
}

std::vector<std::pair<std::string, Stage>> stage_choices() {
  std::vector<std::pair<std::string, Stage>> out;
  for (const StageModel& m : kStages) out.push_back({m.name, m.stage});
  return out;
}

Status parse_stage(const std::string& text, Stage* out) {
  for (const StageModel& m : kStages)
    if (text == m.name) {
      *out = m.stage;
      return Status::ok();
    }
  std::string names;
  for (const StageModel& m : kStages) names += std::string(names.empty() ? "" : ", ") + m.name;
  return Status::error("unknown stage '" + text + "'; use one of " + names);
}

}  // namespace zb
