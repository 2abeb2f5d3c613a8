// Fused optimizer updates over a flat shard: AdamW and momentum, FP32 state, BF16 weights out.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "harness/core/bf16.h"
#include "harness/core/dtype.h"

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

// AdamW as PyTorch's torch.optim.AdamW defines it (decoupled weight decay), per element:
//   g = grad * grad_scale
//   master *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   master -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   weights = bf16(master), rounded to nearest even
// m and v are FP32 state: the update reads them after they are stored, so a v that overflows
// FP32 (|g| above ~1e19 at beta2 = 0.999) makes that element's step 0, in every implementation.
struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;         // >= 1; bias correction divides by 1 - beta^step
  float grad_scale = 1.0f;  // e.g. 1/N when the reduced gradient is a sum over N ranks
};

// SGD with momentum (PyTorch's form: no dampening, not Nesterov) and decoupled weight decay;
// this is the 12-byte state family, e.g. Muon without the orthogonalisation. Per element:
//   g = grad * grad_scale
//   m = beta * m + g
//   master = master * (1 - lr * weight_decay) - lr * m
//   weights = bf16(master)
struct MomentumParams {
  float lr = 1e-2f;
  float beta = 0.9f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
};

// Bytes each update moves per parameter, the numerator of its achieved bandwidth.
// Adam reads g, master, m, v and writes master, m, v, weights: 2+4+4+4 + 4+4+4+2 = 28 with
// BF16 gradients, 30 with FP32. Momentum reads g, master, m and writes master, m, weights.
constexpr size_t adam_bytes_per_param(DType grad) { return dtype_size(grad) + 12 + 14; }
constexpr size_t momentum_bytes_per_param(DType grad) { return dtype_size(grad) + 8 + 10; }
static_assert(adam_bytes_per_param(DType::bf16) == 28 && adam_bytes_per_param(DType::f32) == 30);
static_assert(momentum_bytes_per_param(DType::bf16) == 20 &&
              momentum_bytes_per_param(DType::f32) == 22);

// CPU kernels: `threads` 0 means every hardware thread. Every array holds n elements; the
// state arrays must not overlap each other or the gradient. Precondition: params.step >= 1.
void adam_cpu(const void* grad, DType grad_dtype, float* master, float* m, float* v, Bf16* weights,
              size_t n, const AdamParams& params, int threads);
void momentum_cpu(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                  size_t n, const MomentumParams& params, int threads);

// Plain references for tests: each element's update is computed in double from the FP32
// inputs; m and v are rounded to FP32 (they are stored state) before the weight update reads
// them, and master is rounded once at the end.
void adam_reference(const void* grad, DType grad_dtype, float* master, float* m, float* v,
                    Bf16* weights, size_t n, const AdamParams& params);
void momentum_reference(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                        size_t n, const MomentumParams& params);

#if defined(ZB_HAVE_CUDA)
// One launch on `stream`; all pointers are device memory. Errors: step < 1, launch failures.
Status adam_cuda(const void* grad, DType grad_dtype, float* master, float* m, float* v,
                 Bf16* weights, size_t n, const AdamParams& params, cudaStream_t stream);
Status momentum_cuda(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                     size_t n, const MomentumParams& params, cudaStream_t stream);
#endif

// ---- Per-element math shared by the CPU and CUDA kernels, so both do the same operations.

// Per-call scalars, computed once in double and rounded to FP32, so the inner loop has no pow.
struct AdamConstants {
  float grad_scale, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;     // lr / (1 - beta1^step)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  float decay;         // 1 - lr * weight_decay
};

inline AdamConstants adam_constants(const AdamParams& p) {
  double bc1 = 1.0 - std::pow(double(p.beta1), double(p.step));
  double bc2 = 1.0 - std::pow(double(p.beta2), double(p.step));
  AdamConstants c;
  c.grad_scale = p.grad_scale;
  c.beta1 = p.beta1;
  c.one_minus_beta1 = float(1.0 - double(p.beta1));
  c.beta2 = p.beta2;
  c.one_minus_beta2 = float(1.0 - double(p.beta2));
  c.eps = p.eps;
  c.step_size = float(double(p.lr) / bc1);
  c.inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  c.decay = float(1.0 - double(p.lr) * double(p.weight_decay));
  return c;
}

// Adam in two halves around the square root, so the CPU kernel can take the square roots of a
// block at once (see adam_cpu.cc); adam_element below is the whole update for one element.
ZB_HD void adam_moments(float grad, float& m, float& v, const AdamConstants& c) {
  float g = grad * c.grad_scale;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  // (1 - beta2) * g first: g * g alone overflows FP32 30x sooner at beta2 = 0.999.
  v = c.beta2 * v + (c.one_minus_beta2 * g) * g;
}

ZB_HD float adam_master(float master, float m, float sqrt_v, const AdamConstants& c) {
  float denom = sqrt_v * c.inv_sqrt_bc2 + c.eps;
  return c.decay * master - c.step_size * (m / denom);
}

ZB_HD void adam_element(float grad, float& master, float& m, float& v, Bf16& weight,
                        const AdamConstants& c) {
  adam_moments(grad, m, v, c);
  master = adam_master(master, m, sqrtf(v), c);
  weight = float_to_bf16(master);
}

struct MomentumConstants {
  float grad_scale, beta, lr, decay;
};

inline MomentumConstants momentum_constants(const MomentumParams& p) {
  return {p.grad_scale, p.beta, p.lr, float(1.0 - double(p.lr) * double(p.weight_decay))};
}

ZB_HD void momentum_element(float grad, float& master, float& m, Bf16& weight,
                            const MomentumConstants& c) {
  m = c.beta * m + grad * c.grad_scale;
  master = c.decay * master - c.lr * m;
  weight = float_to_bf16(master);
}

}  // namespace zb
