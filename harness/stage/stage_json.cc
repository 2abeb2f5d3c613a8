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

const char* carries_name(StageModel::Carries c) {
  switch (c) {
    case StageModel::Carries::weights: return "weights";
    case StageModel::Carries::grads: return "grads";
    case StageModel::Carries::amax: return "amax";
  }
  return "?";
}

}  // namespace

std::string stage_table_json() {
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (Stage st : table_stages()) {
    const StageModel& m = stage_model(st);
    nlohmann::ordered_json passes = nlohmann::ordered_json::array();
    // One node: its ranks are the node, and nothing crosses to another.
    for (const StageModel::Pass& p : m.passes(1, 1)) {
      nlohmann::ordered_json pass = {{"op", coll_name(p.op)}, {"group", group_name(p.group)}, {"psi", p.psi},
                                     {"carries", carries_name(p.carries)}, {"as", p.as}};
      if (p.unit_elements > 0) pass["unit_elements"] = p.unit_elements;
      passes.push_back(pass);
    }
    table.push_back({{"name", m.name},
                     {"article", m.article},
                     {"weights", sharding_name(m.weights)},
                     {"grads", sharding_name(m.grads)},
                     {"optimizer", sharding_name(m.optimizer)},
                     {"units", m.units == UnitKind::buckets ? "buckets" : "layers"},
                     {"node_weight_copy", m.node_weight_copy},
                     {"quantization", {{"weights", weight_quant_name(m.own_quantization.weights)},
                                       {"grads", grad_quant_name(m.own_quantization.grads)}}},
                     {"can_quantize", {{"weights", m.can_quantize_weights()}, {"grads", m.can_quantize_grads()}}},
                     {"passes", passes},
                     {"volume_psi", m.volume_psi(1, 1)}});
  }
  return table.dump();
}

}  // namespace zb
