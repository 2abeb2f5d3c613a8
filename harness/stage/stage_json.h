// The stage table as JSON, for every results file: readers take each stage's sharding, its
// article formula and the collectives of its step from here rather than restating them.
#pragma once

#include <string>

namespace zb {

// A JSON list, one object per stage in table order: name, article, weights, grads, optimizer
// (replicated, dp_group or node_group), units (buckets or layers), node_weight_copy,
// quantization (what the stage always quantizes: weights none|int8|fp8, grads none|int8|int4),
// can_quantize (whether --quantize-weights and --quantize-grads apply to it), and, for one node
// and the stage's own quantization, passes (op, group, psi: the share of Ψ each collective of a
// step moves, in BF16 elements where quantized; carries: weights, grads or amax; as: bf16, int8,
// fp8, int4 or grad, the gradient dtype; unit_elements: FP8's amax exchange, elements per rank
// and unit) and volume_psi.
std::string stage_table_json();

}  // namespace zb
