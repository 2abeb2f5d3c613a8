// The stage table written as JSON, from the table itself.
#include "harness/stage/stage_json.h"

#include <nlohmann/json.hpp>

#include "harness/stage/stage.h"

namespace zb {
namespace {

const char* sharding_name(Sharding s) {
  switch (s) {
    case Sharding::replicated: return "replicated";
    case Sharding::dp_group: return "dp_group";
    case Sharding::node_group: return "node_group";
  }
  return "?";
}

}  // namespace

std::string stage_table_json() {
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (Stage st : all_stages()) {
    const StageModel& m = stage_model(st);
    nlohmann::ordered_json passes = nlohmann::ordered_json::array();
    // One node: its ranks are the node, and nothing crosses to another.
    for (const StageModel::Pass& p : m.passes(1, 1))
      passes.push_back({{"op", coll_name(p.op)}, {"group", group_name(p.group)}, {"psi", p.psi}});
    table.push_back({{"name", m.name},
                     {"article", m.article},
                     {"weights", sharding_name(m.weights)},
                     {"grads", sharding_name(m.grads)},
                     {"optimizer", sharding_name(m.optimizer)},
                     {"units", m.units == UnitKind::buckets ? "buckets" : "layers"},
                     {"node_weight_copy", m.node_weight_copy},
                     {"passes", passes},
                     {"volume_psi", m.volume_psi(1, 1)}});
  }
  return table.dump();
}

}  // namespace zb
