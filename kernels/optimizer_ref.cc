// Plain double-precision references for the optimizer kernels; tests compare against these.
#include <cmath>

#include "kernels/optimizer.h"

namespace zb {

namespace {

double load_grad(const void* grad, DType dtype, size_t i) {
  if (dtype == DType::f32) return double(static_cast<const float*>(grad)[i]);
  return double(bf16_to_float(static_cast<const Bf16*>(grad)[i]));
}

}  // namespace

void adam_reference(const void* grad, DType grad_dtype, float* master, float* m, float* v,
                    Bf16* weights, size_t n, const AdamParams& p) {
  const double lr = p.lr, b1 = p.beta1, b2 = p.beta2, eps = p.eps, wd = p.weight_decay;
  const double bc1 = 1.0 - std::pow(b1, double(p.step));
  const double bc2 = 1.0 - std::pow(b2, double(p.step));
  for (size_t i = 0; i < n; ++i) {
    double g = load_grad(grad, grad_dtype, i) * double(p.grad_scale);
    // Stored FP32 state: the update below reads what was stored, as the kernels do.
    m[i] = float(b1 * double(m[i]) + (1.0 - b1) * g);
    v[i] = float(b2 * double(v[i]) + (1.0 - b2) * g * g);
    double m_hat = double(m[i]) / bc1;
    double v_hat = double(v[i]) / bc2;
    double updated = double(master[i]) * (1.0 - lr * wd) - lr * m_hat / (std::sqrt(v_hat) + eps);
    master[i] = float(updated);
    weights[i] = float_to_bf16(master[i]);
  }
}

void momentum_reference(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                        size_t n, const MomentumParams& p) {
  const double lr = p.lr, beta = p.beta, wd = p.weight_decay;
  for (size_t i = 0; i < n; ++i) {
    double g = load_grad(grad, grad_dtype, i) * double(p.grad_scale);
    m[i] = float(beta * double(m[i]) + g);
    master[i] = float(double(master[i]) * (1.0 - lr * wd) - lr * double(m[i]));
    weights[i] = float_to_bf16(master[i]);
  }
}

}  // namespace zb
