// Offload formulas: host bytes, freed device bytes and PCIe bytes per step, per stage and mode.
#include "harness/plan/offload_formula.h"

#include "harness/plan/state_formula.h"

namespace zb {

const char* offload_name(Offload mode) {
  switch (mode) {
    case Offload::grads: return "grads";
    case Offload::optimizer: return "optimizer";
    case Offload::weights: return "weights";
    case Offload::none: break;
  }
  return "none";
}

std::vector<std::pair<std::string, Offload>> offload_choices() {
  return {{"none", Offload::none}, {"grads", Offload::grads}, {"optimizer", Offload::optimizer},
          {"weights", Offload::weights}};
}

OffloadPerParam offload_per_param(Stage stage, Offload mode, Optimizer optimizer, int grad_bytes,
                                  int64_t n, int64_t s, int64_t microbatches) {
  OffloadPerParam r;
  if (mode == Offload::none) return r;
  const StageModel& m = stage_model(stage);
  if (s <= 0) s = n;
  auto share = [&](Sharding how) {
    return how == Sharding::replicated ? 1.0 : 1.0 / double(how == Sharding::node_group ? s : n);
  };
  const double mb = double(microbatches);
  const double g = double(grad_bytes) * share(m.grads);
  const double o = (kMasterBytes + moment_bytes(optimizer)) * share(m.optimizer);
  const double u = kWeightBytes * share(m.optimizer);
  const double w = kWeightBytes * share(m.weights);
  // Gradients leave after every micro-batch's reduction: a slot is reused for the next
  // chunk, so nothing on the device can hold them until the step ends.
  r.host = g;
  r.d2h = mb * g;
  if (mode == Offload::grads) {
    r.h2d = g;
  } else {
    r.host += o;
    if (mode == Offload::optimizer) {
      r.h2d = u;
    } else {
      r.host += w;
      r.h2d = mb * (m.node_weight_copy ? 1.0 : 2.0) * w;
      if (u < w) {
        r.h2d += u;
        r.d2h += w;
      }
    }
  }
  r.freed = r.host;
  return r;
}

double offload_slot_bytes_per_element(Offload mode, int grad_bytes) {
  if (mode == Offload::none) return 0;
  return double(grad_bytes) + (mode == Offload::weights ? kWeightBytes : 0.0);
}

}  // namespace zb
