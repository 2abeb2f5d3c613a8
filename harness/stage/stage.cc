// The stage table: each stage's sharding rule, in one place.
#include "harness/stage/stage.h"

namespace zb {
namespace {

constexpr Sharding kAll = Sharding::replicated, kShard = Sharding::dp_group, kNode = Sharding::node_group;

// Each stage shards one more category than the last: optimizer state (z1), then gradients
// (z2), then the weights themselves (z3). The node-aware ones: hsdp (PyTorch's HSDP, MiCS)
// is z3 within each node and plain replication across nodes; hpz (ZeRO++'s hierarchical
// partition) is z3 over everyone plus a node-sharded copy of the weights for backward.
const StageModel kStages[] = {
    //  stage      name  article       weights grads   optimizer units   node weight copy
    {Stage::dp, "dp", "w+g+o", kAll, kAll, kAll, UnitKind::buckets},
    {Stage::z1, "z1", "w+g+o/N", kAll, kAll, kShard, UnitKind::buckets},
    {Stage::z2, "z2", "w+(g+o)/N", kAll, kShard, kShard, UnitKind::buckets},
    {Stage::z3, "z3", "(w+g+o)/N", kShard, kShard, kShard, UnitKind::layers},
    {Stage::hsdp, "hsdp", "(w+g+o)/S", kNode, kNode, kNode, UnitKind::layers},
    {Stage::hpz, "hpz", "(w+g+o)/N+w/S", kShard, kShard, kShard, UnitKind::layers, true},
};

}  // namespace

std::vector<StageModel::Pass> StageModel::passes(int64_t ranks_per_node, int64_t nodes) const {
  std::vector<Pass> out;
  const Group og = optimizer_group();
  for (int i = 0; i < all_reduces(); ++i) out.push_back({Coll::all_reduce, Group::world, 1.0});
  for (int i = 0; i < reduce_scatters(); ++i) out.push_back({Coll::reduce_scatter, og, 1.0});
  if (reduces_across_nodes() && nodes > 1) out.push_back({Coll::all_reduce, Group::cross, 1.0 / double(ranks_per_node)});
  if (shards_weights()) {
    out.push_back({Coll::all_gather, weight_group(), 1.0});
    out.push_back({Coll::all_gather, backward_gather_group(), 1.0});
  } else if (all_gathers()) {
    out.push_back({Coll::all_gather, og, 1.0});
  }
  return out;
}

double StageModel::volume_psi(int64_t ranks_per_node, int64_t nodes) const {
  double v = 0;
  for (const Pass& p : passes(ranks_per_node, nodes)) v += (p.op == Coll::all_reduce ? 2.0 : 1.0) * p.psi;
  return v;
}

const StageModel& stage_model(Stage stage) {
  for (const StageModel& m : kStages)
    if (m.stage == stage) return m;
  return kStages[0];  // unreachable: every Stage has an entry
}

const char* stage_name(Stage stage) { return stage_model(stage).name; }

const std::vector<Stage>& all_stages() {
  static const std::vector<Stage> stages = [] {
    std::vector<Stage> out;
    for (const StageModel& m : kStages) out.push_back(m.stage);
    return out;
  }();
  return stages;
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
