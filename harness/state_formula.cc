// ZeRO state and traffic formulas: bytes per parameter, volume per step, ring wire bytes.
#include "harness/state_formula.h"

namespace zb {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::dp: return "dp";
    case Stage::z1: return "z1";
    case Stage::z2: return "z2";
    case Stage::z3: return "z3";
  }
  return "?";
}

const std::vector<Stage>& all_stages() {
  static const std::vector<Stage> stages = {Stage::dp, Stage::z1, Stage::z2, Stage::z3};
  return stages;
}

const std::vector<std::string>& stage_names() {
  static const std::vector<std::string> names = {"dp", "z1", "z2", "z3"};
  return names;
}

Status parse_stage(const std::string& text, Stage* out) {
  for (Stage s : all_stages())
    if (text == stage_name(s)) {
      *out = s;
      return Status::ok();
    }
  return Status::error("unknown stage '" + text + "'; use one of dp, z1, z2, z3");
}

const char* optimizer_name(Optimizer optimizer) {
  return optimizer == Optimizer::adam ? "adam" : "momentum";
}

Status parse_optimizer(const std::string& text, Optimizer* out) {
  if (text == "adam") *out = Optimizer::adam;
  else if (text == "momentum") *out = Optimizer::momentum;
  else return Status::error("unknown optimizer '" + text + "'; use adam or momentum");
  return Status::ok();
}

double moment_bytes(Optimizer optimizer) { return optimizer == Optimizer::adam ? 8 : 4; }

StateBytes state_bytes(Optimizer optimizer, int grad_bytes) {
  return {kWeightBytes, double(grad_bytes), kMasterBytes + moment_bytes(optimizer)};
}

CategoryBytes bytes_per_param_by_category(Stage stage, Optimizer optimizer, int grad_bytes,
                                          int64_t n) {
  // Each stage shards one more category than the last: optimizer state (z1),
  // then gradients (z2), then the weights themselves (z3).
  const double shard = 1.0 / double(n);
  const bool opt_sharded = stage != Stage::dp;
  const bool grads_sharded = stage == Stage::z2 || stage == Stage::z3;
  const bool weights_sharded = stage == Stage::z3;
  CategoryBytes c;
  c.weights = kWeightBytes * (weights_sharded ? shard : 1.0);
  c.grads = double(grad_bytes) * (grads_sharded ? shard : 1.0);
  c.master = kMasterBytes * (opt_sharded ? shard : 1.0);
  c.moments = moment_bytes(optimizer) * (opt_sharded ? shard : 1.0);
  return c;
}

double bytes_per_param(Stage stage, Optimizer optimizer, int grad_bytes, int64_t n) {
  return bytes_per_param_by_category(stage, optimizer, grad_bytes, n).total();
}

double volume_psi(Stage stage) { return stage == Stage::z3 ? 3.0 : 2.0; }

StepTraffic step_traffic(Stage stage, int64_t n, double psi, int grad_bytes) {
  StepTraffic t;
  switch (stage) {
    case Stage::dp:
      t.all_reduce_elements = psi;
      break;
    case Stage::z1:
    case Stage::z2:
      // z2 reduce-scatters bucket by bucket during backward, z1 once at the
      // end; the sum over buckets is the same full buffer.
      t.reduce_scatter_elements = psi;
      t.all_gather_elements = psi;
      break;
    case Stage::z3:
      // Weights are gathered before the forward and again before the backward,
      // because they were released in between to keep only the shard resident.
      t.reduce_scatter_elements = psi;
      t.all_gather_elements = 2 * psi;
      break;
  }
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
