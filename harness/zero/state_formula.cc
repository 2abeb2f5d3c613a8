// ZeRO state and traffic formulas: bytes per parameter, volume per step, ring wire bytes.
#include "harness/zero/state_formula.h"

namespace zb {

StateBytes state_bytes(Optimizer optimizer, int grad_bytes) {
  return {kWeightBytes, double(grad_bytes), kMasterBytes + moment_bytes(optimizer)};
}

CategoryBytes bytes_per_param_by_category(Stage stage, Optimizer optimizer, int grad_bytes,
                                          int64_t n) {
  const StageModel& m = stage_model(stage);
  auto share = [&](bool sharded) { return sharded ? 1.0 / double(n) : 1.0; };
  CategoryBytes c;
  c.weights = kWeightBytes * share(m.shards_weights());
  c.grads = double(grad_bytes) * share(m.shards_grads());
  c.master = kMasterBytes * share(m.shards_optimizer());
  c.moments = moment_bytes(optimizer) * share(m.shards_optimizer());
  return c;
}

double bytes_per_param(Stage stage, Optimizer optimizer, int grad_bytes, int64_t n) {
  return bytes_per_param_by_category(stage, optimizer, grad_bytes, n).total();
}

double volume_psi(Stage stage) { return stage_model(stage).volume_psi(); }

StepTraffic step_traffic(Stage stage, int64_t n, double psi, int grad_bytes) {
  const StageModel& m = stage_model(stage);
  StepTraffic t;
  // Bucket by bucket or layer by layer, the collectives of a step add up to these passes
  // over the full vector.
  t.all_reduce_elements = m.all_reduces() * psi;
  t.reduce_scatter_elements = m.reduce_scatters() * psi;
  t.all_gather_elements = m.all_gathers() * psi;
  t.elements = 2 * t.all_reduce_elements + t.reduce_scatter_elements + t.all_gather_elements;
  // A ring all-reduce is a reduce-scatter pass plus an all-gather pass, each
  // sending (n-1)/n of the buffer from every rank.
  const double ring = double(n - 1) / double(n);
  const double g = double(grad_bytes);
  t.wire_bytes = ring * (2 * t.all_reduce_elements * g + t.reduce_scatter_elements * g +
                         t.all_gather_elements * kWeightBytes);
  return t;
}

}  // namespace zb
