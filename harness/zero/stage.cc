// The stage table: each stage's sharding rule, in one place.
#include "harness/zero/stage.h"

namespace zb {
namespace {

constexpr Sharding kAll = Sharding::replicated, kShard = Sharding::dp_group;

// Each stage shards one more category than the last: optimizer state (z1), then gradients
// (z2), then the weights themselves (z3).
const StageModel kStages[] = {
    //  stage      name  article       weights grads   optimizer units
    {Stage::dp, "dp", "w+g+o", kAll, kAll, kAll, UnitKind::buckets},
    {Stage::z1, "z1", "w+g+o/N", kAll, kAll, kShard, UnitKind::buckets},
    {Stage::z2, "z2", "w+(g+o)/N", kAll, kShard, kShard, UnitKind::buckets},
    {Stage::z3, "z3", "(w+g+o)/N", kShard, kShard, kShard, UnitKind::layers},
};

}  // namespace

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
  return Status::error("unknown stage '" + text + "'; use one of dp, z1, z2, z3");
}

}  // namespace zb
