// Optimizer names, state sizes and traffic.
#include "harness/compute/optimizer_config.h"

namespace zb {

const char* optimizer_name(Optimizer optimizer) {
  return optimizer == Optimizer::adam ? "adam" : "momentum";
}

Status parse_optimizer(const std::string& text, Optimizer* out) {
  if (text == "adam") *out = Optimizer::adam;
  else if (text == "momentum") *out = Optimizer::momentum;
  else return Status::error("unknown optimizer '" + text + "'; use adam or momentum");
  return Status::ok();
}

std::vector<std::pair<std::string, Optimizer>> optimizer_choices() {
  return {{"adam", Optimizer::adam}, {"momentum", Optimizer::momentum}};
}

double moment_bytes(Optimizer optimizer) { return optimizer == Optimizer::adam ? 8 : 4; }

size_t update_bytes_per_param(Optimizer optimizer, DType grad) {
  return optimizer == Optimizer::adam ? adam_bytes_per_param(grad) : momentum_bytes_per_param(grad);
}

}  // namespace zb
