// Synthetic training data on the CPU.
#include "kernels/synthetic.h"

namespace zb {

void init_weights_cpu(float* master, Bf16* weights, size_t n, uint64_t first) {
  for (size_t i = 0; i < n; ++i) {
    master[i] = initial_weight(first + i);
    weights[i] = float_to_bf16(master[i]);
  }
}

void synthetic_grad_cpu(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                        int rank, int ranks, int64_t step) {
  if (dtype == DType::bf16) {
    Bf16* g = static_cast<Bf16*>(grad);
    for (size_t i = 0; i < n; ++i)
      g[i] = float_to_bf16(synthetic_grad(weights[i], rank, ranks, step, first + i));
  } else {
    float* g = static_cast<float*>(grad);
    for (size_t i = 0; i < n; ++i) g[i] = synthetic_grad(weights[i], rank, ranks, step, first + i);
  }
}

}  // namespace zb
