// The stage table as JSON, for every results file: readers take each stage's sharding, its
// article formula and the collectives of its step from here rather than restating them.
#pragma once

#include <string>

namespace zb {

// A JSON list, one object per stage in table order: name, article, weights, grads, optimizer
// (replicated, dp_group or node_group), units (buckets or layers), node_weight_copy, and, for
// one node, passes (op, group, psi: the share of Ψ each collective of a step moves) and
// volume_psi.
std::string stage_table_json();

}  // namespace zb
