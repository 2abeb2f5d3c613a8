// The optimizers a step runs (AdamW, momentum): their settings, state and traffic per parameter.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/status.h"
#include "kernels/optimizer.h"

namespace zb {

enum class Optimizer { adam, momentum };
const char* optimizer_name(Optimizer optimizer);
Status parse_optimizer(const std::string& text, Optimizer* out);
std::vector<std::pair<std::string, Optimizer>> optimizer_choices();  // by name, for flags

// FP32 moments per parameter: 8 (adam: m and v) or 4 (momentum: m).
double moment_bytes(Optimizer optimizer);
// Bytes one update moves per parameter by the kernel's own stated model (kernels/optimizer.h):
// Adam 28 with BF16 gradients, 30 with FP32; momentum 20 and 22.
size_t update_bytes_per_param(Optimizer optimizer, DType grad);

struct OptimizerConfig {
  Optimizer kind = Optimizer::adam;
  AdamParams adam;
  MomentumParams momentum;
};

}  // namespace zb
