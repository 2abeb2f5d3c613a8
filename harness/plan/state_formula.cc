// ZeRO state and traffic formulas: bytes per parameter, volume per step, ring wire bytes.
#include "harness/plan/state_formula.h"

#include <string>

namespace zb {

StateBytes state_bytes(Optimizer optimizer, int grad_bytes) {
  return {kWeightBytes, double(grad_bytes), kMasterBytes + moment_bytes(optimizer)};
}

CategoryBytes bytes_per_param_by_category(Stage stage, Optimizer optimizer, int grad_bytes,
                                          int64_t n, int64_t s) {
  const StageModel& m = stage_model(stage);
  if (s <= 0) s = n;
  auto share = [&](Sharding how) {
    return how == Sharding::replicated ? 1.0 : 1.0 / double(how == Sharding::node_group ? s : n);
  };
  CategoryBytes c;
  c.weights = kWeightBytes * (share(m.weights) + (m.node_weight_copy ? 1.0 / double(s) : 0.0));
  c.grads = double(grad_bytes) * share(m.grads);
  c.master = kMasterBytes * share(m.optimizer);
  c.moments = moment_bytes(optimizer) * share(m.optimizer);
  return c;
}

double bytes_per_param(Stage stage, Optimizer optimizer, int grad_bytes, int64_t n, int64_t s) {
  return bytes_per_param_by_category(stage, optimizer, grad_bytes, n, s).total();
}

double volume_psi(Stage stage, int64_t s, int64_t nodes, const Quantization& q) {
  return stage_model(stage).volume_psi(s, nodes, q);
}

StepTraffic step_traffic(Stage stage, int64_t n, double psi, int grad_bytes, int64_t s, const Quantization& q,
                         int64_t units) {
  if (s <= 0) s = n;
  const int64_t nodes = n / s;
  StepTraffic t;
  // Bucket by bucket or layer by layer, the collectives of a step add up to these passes
  // over the full vector. A ring over k ranks sends (k-1)/k of each pass from every rank
  // (twice for an all-reduce: a reduce-scatter pass plus an all-gather pass), and so does an
  // all-to-all, straight to each peer; gradients travel in their own dtype, weights as BF16,
  // and what is quantized as the bytes it takes, counted as BF16 elements.
  for (const StageModel::Pass& p : stage_model(stage).passes(s, nodes, q)) {
    const double elems = p.psi * psi + p.unit_elements * double(n) * double(units), twice = p.op == Coll::all_reduce ? 2.0 : 1.0;
    const int64_t k = p.group == Group::world ? n : p.group == Group::node ? s : nodes;
    const double sent = twice * elems * double(k - 1) / double(k) *
                        (std::string(p.as) == "grad" ? double(grad_bytes) : kWeightBytes);
    (p.op == Coll::all_reduce       ? t.all_reduce_elements
     : p.op == Coll::reduce_scatter ? t.reduce_scatter_elements
     : p.op == Coll::all_to_all     ? t.all_to_all_elements
                                    : t.all_gather_elements) += elems;
    t.wire_bytes += sent;
    const bool spans = p.group != Group::node && nodes > 1;
    (spans ? t.inter_elements : t.intra_elements) += twice * elems;
    // What leaves a node: one rank's sends for a world ring, every rank's for a cross ring.
    if (spans) t.inter_node_bytes += sent * (p.group == Group::cross ? double(s) : 1.0);
  }
  t.elements = t.intra_elements + t.inter_elements;
  return t;
}

}  // namespace zb
