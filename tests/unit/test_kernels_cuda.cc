// GPU kernels against the CPU references: optimizer updates, bandwidth probes, cuBLAS GEMM and the spin.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/gemm.h"
#include "kernels/optimizer.h"
#include "kernels/spin.h"
#include "tests/unit/random_values.h"

namespace zb {
namespace {

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// cudaGetDeviceCount fails outright when there is no driver: that is zero GPUs too.
#define ZB_SKIP_WITHOUT_GPU()         \
  if (!have_gpu()) {                  \
    GTEST_SKIP() << "no CUDA device"; \
  }

#define ZB_ASSERT_OK(expr)                 \
  do {                                     \
    ::zb::Status zb_s_ = (expr);           \
    ASSERT_TRUE(zb_s_) << zb_s_.message(); \
  } while (0)

// A device copy of a host vector, with `pad` spare elements in front so a test can misalign it.
template <class T>
struct DeviceVec {
  T* base = nullptr;
  T* ptr = nullptr;
  size_t n = 0;
  DeviceVec(const std::vector<T>& host, size_t pad) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&base, (n + pad + 1) * sizeof(T)), cudaSuccess);
    ptr = base + pad;
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVec() { cudaFree(base); }
  std::vector<T> get() const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

// The bound of test_optimizer_kernels.cc for one step: 8 FP32 ulps (2^-24 each) relative to
// the terms of each result. The GPU contracts multiply-adds into FMAs, which only rounds less.
constexpr double kTol = 8.0 / (1 << 24);
constexpr double kTiny = 8 * double(FLT_MIN);

bool near(double got, double want, double tol) {
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol + kTiny;
}

// One Adam step on the GPU and on the reference from the same state. `grad_pad` and
// `state_pad` shift the device arrays: equal shifts keep a common 16-byte alignment (head,
// vector body, tail), different ones force every element down the scalar path.
void check_adam_cuda(size_t n, DType dtype, size_t grad_pad, size_t state_pad, float scale,
                     int64_t step) {
  std::mt19937 rng(unsigned(n + grad_pad * 7 + state_pad * 131 + step));
  std::vector<float> gf = random_values(n, -scale, scale, rng);
  std::vector<Bf16> gb(n);
  for (size_t i = 0; i < n; ++i) gb[i] = float_to_bf16(gf[i]);
  std::vector<float> master = random_values(n, -1, 1, rng), m = random_values(n, -0.1f, 0.1f, rng),
                     v = random_values(n, 0, 0.01f, rng);
  AdamParams p;
  p.step = step;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.5f;
  DeviceVec<float> d_gf(gf, grad_pad), d_master(master, state_pad), d_m(m, state_pad),
      d_v(v, state_pad);
  DeviceVec<Bf16> d_gb(gb, grad_pad), d_w(std::vector<Bf16>(n), state_pad);
  const void* d_grad = dtype == DType::f32 ? (const void*)d_gf.ptr : d_gb.ptr;
  const void* h_grad = dtype == DType::f32 ? (const void*)gf.data() : gb.data();
  ZB_ASSERT_OK(adam_cuda(d_grad, dtype, d_master.ptr, d_m.ptr, d_v.ptr, d_w.ptr, n, p, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> rm = master, rmm = m, rv = v;
  std::vector<Bf16> rw(n);
  adam_reference(h_grad, dtype, rm.data(), rmm.data(), rv.data(), rw.data(), n, p);
  std::vector<float> got_master = d_master.get(), got_m = d_m.get(), got_v = d_v.get();
  std::vector<Bf16> got_w = d_w.get();
  const double bc1 = 1 - std::pow(double(p.beta1), double(step));
  const double bc2 = 1 - std::pow(double(p.beta2), double(step));
  for (size_t i = 0; i < n; ++i) {
    double g = (dtype == DType::f32 ? gf[i] : bf16_to_float(gb[i])) * double(p.grad_scale);
    double m_terms = p.beta1 * std::fabs(m[i]) + (1 - double(p.beta1)) * std::fabs(g);
    double v_terms = p.beta2 * double(v[i]) + (1 - double(p.beta2)) * g * g;
    double denom = std::sqrt(double(rv[i]) / bc2) + p.eps;
    double terms = std::fabs(master[i]) + p.lr / bc1 * m_terms / denom;
    ASSERT_TRUE(near(got_m[i], rmm[i], kTol * m_terms)) << "m[" << i << "]";
    ASSERT_TRUE(near(got_v[i], rv[i], kTol * v_terms)) << "v[" << i << "]";
    ASSERT_TRUE(near(got_master[i], rm[i], kTol * terms + 2 * kTol * p.lr / bc1 * m_terms / denom))
        << "master[" << i << "] " << got_master[i] << " vs " << rm[i];
    ASSERT_EQ(got_w[i].bits, float_to_bf16(got_master[i]).bits) << "weights[" << i << "]";
  }
}

TEST(KernelsCuda, AdamMatchesReference) {
  ZB_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::bf16, DType::f32})
    for (size_t n : {size_t(1), size_t(7), size_t(1001), size_t(100003)}) {
      check_adam_cuda(n, dt, 0, 0, 2.0f, 1);
      check_adam_cuda(n, dt, 3, 3, 2.0f, 10);  // common misalignment: head + vectors + tail
      check_adam_cuda(n, dt, 1, 2, 2.0f, 7);   // no common alignment: all scalar
    }
  for (float scale : {0.0f, 1e-30f, 1e30f})
    for (int64_t step : {int64_t(1), int64_t(1000000)})
      check_adam_cuda(1001, DType::bf16, 0, 0, scale, step);
}

TEST(KernelsCuda, AdamRejectsStepZero) {
  ZB_SKIP_WITHOUT_GPU();
  AdamParams p;
  p.step = 0;
  EXPECT_FALSE(adam_cuda(nullptr, DType::bf16, nullptr, nullptr, nullptr, nullptr, 0, p, nullptr));
}

TEST(KernelsCuda, MomentumMatchesReference) {
  ZB_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  MomentumParams p;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.5f;
  for (DType dt : {DType::bf16, DType::f32})
    for (size_t n : {size_t(1), size_t(13), size_t(100003)})
      for (size_t pad : {size_t(0), size_t(5)}) {
        std::vector<float> gf = random_values(n, -2, 2, rng), master = random_values(n, -1, 1, rng),
                           m = random_values(n, -0.1f, 0.1f, rng);
        std::vector<Bf16> gb(n);
        for (size_t i = 0; i < n; ++i) gb[i] = float_to_bf16(gf[i]);
        DeviceVec<float> d_gf(gf, pad), d_master(master, pad), d_m(m, pad);
        DeviceVec<Bf16> d_gb(gb, pad), d_w(std::vector<Bf16>(n), pad);
        const void* d_grad = dt == DType::f32 ? (const void*)d_gf.ptr : d_gb.ptr;
        const void* h_grad = dt == DType::f32 ? (const void*)gf.data() : gb.data();
        ZB_ASSERT_OK(momentum_cuda(d_grad, dt, d_master.ptr, d_m.ptr, d_w.ptr, n, p, nullptr));
        std::vector<float> rm = master, rmm = m;
        std::vector<Bf16> rw(n);
        momentum_reference(h_grad, dt, rm.data(), rmm.data(), rw.data(), n, p);
        std::vector<float> got_master = d_master.get(), got_m = d_m.get();
        std::vector<Bf16> got_w = d_w.get();
        for (size_t i = 0; i < n; ++i) {
          double g = (dt == DType::f32 ? gf[i] : bf16_to_float(gb[i])) * double(p.grad_scale);
          double m_terms = p.beta * std::fabs(m[i]) + std::fabs(g);
          ASSERT_TRUE(near(got_m[i], rmm[i], kTol * m_terms)) << "m[" << i << "]";
          ASSERT_TRUE(
              near(got_master[i], rm[i], kTol * (std::fabs(master[i]) + 2 * p.lr * m_terms)))
              << "master[" << i << "]";
          ASSERT_EQ(got_w[i].bits, float_to_bf16(got_master[i]).bits) << "weights[" << i << "]";
        }
      }
}

TEST(KernelsCuda, BandwidthProbesMatchTheCpuOnes) {
  ZB_SKIP_WITHOUT_GPU();
  for (Pattern p : bandwidth_patterns(true))
    for (size_t pad : {size_t(0), size_t(1)})
      for (size_t n : {size_t(1), size_t(6), size_t(100004), size_t(100003)}) {
        const int k = pattern_arrays(p);
        std::vector<std::vector<float>> host(static_cast<size_t>(k), std::vector<float>(n));
        for (int a = 0; a < k; ++a)
          for (size_t i = 0; i < n; ++i) host[size_t(a)][i] = float(i % 89) * 0.5f + float(a);
        // Array 1 misaligned by `pad` floats: the kernel's one-float path.
        std::vector<std::unique_ptr<DeviceVec<float>>> dev;
        std::vector<float*> ptrs;
        for (int a = 0; a < k; ++a) {
          dev.push_back(std::make_unique<DeviceVec<float>>(host[size_t(a)], a == 1 ? pad : 0));
          ptrs.push_back(dev.back()->ptr);
        }
        ZB_ASSERT_OK(bandwidth_cuda(p, ptrs.data(), n, nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float*> cpu;
        for (auto& h : host) cpu.push_back(h.data());
        bandwidth_cpu(p, cpu.data(), n, 1);
        for (int a = 0; a < k; ++a)
          ASSERT_EQ(dev[size_t(a)]->get(), host[size_t(a)]) << pattern_name(p) << " n " << n << " pad " << pad;
      }
}

TEST(KernelsCuda, GemmMatchesReference) {
  ZB_SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  std::mt19937 rng(11);
  const int sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {65, 33, 129}, {128, 256, 64}};
  for (const auto& s : sizes) {
    int m = s[0], n = s[1], k = s[2];
    std::vector<Bf16> a(size_t(m) * k), b(size_t(k) * n);
    for (Bf16& x : a) x = float_to_bf16(random_values(1, -1, 1, rng)[0]);
    for (Bf16& x : b) x = float_to_bf16(random_values(1, -1, 1, rng)[0]);
    std::vector<double> want(size_t(m) * n);
    gemm_reference_bf16(a.data(), b.data(), want.data(), m, n, k);
    DeviceVec<Bf16> d_a(a, 0), d_b(b, 0), d_cb(std::vector<Bf16>(size_t(m) * n), 0);
    DeviceVec<float> d_c(std::vector<float>(size_t(m) * n), 0);
    ZB_ASSERT_OK(gemm_cuda_bf16(handle, d_a.ptr, d_b.ptr, d_c.ptr, DType::f32, m, n, k, nullptr));
    ZB_ASSERT_OK(gemm_cuda_bf16(handle, d_a.ptr, d_b.ptr, d_cb.ptr, DType::bf16, m, n, k, nullptr));
    std::vector<float> got = d_c.get();
    std::vector<Bf16> got_b = d_cb.get();
    for (size_t i = 0; i < got.size(); ++i) {
      // FP32 sums of exact products, in cuBLAS's own order (see test_gemm_spin.cc); BF16 C
      // within one BF16 rounding (2^-8 relative) of that.
      double bound = k * std::ldexp(std::fabs(want[i]) + 1.0, -22);
      ASSERT_NEAR(got[i], want[i], bound) << m << "x" << n << "x" << k << " at " << i;
      ASSERT_NEAR(bf16_to_float(got_b[i]), want[i], std::ldexp(std::fabs(want[i]), -8) + bound);
    }
  }
  cublasDestroy(handle);
}

TEST(KernelsCuda, SpinRunsAtLeastItsCyclesAndIsCalibrated) {
  ZB_SKIP_WITHOUT_GPU();
  double rate = 0;
  ZB_ASSERT_OK(spin_cuda_cycles_per_second(&rate));
  EXPECT_TRUE(std::isfinite(rate) && rate > 0) << rate;
  long long* spun = nullptr;
  ASSERT_EQ(cudaMalloc(&spun, sizeof(long long)), cudaSuccess);
  for (long long cycles : {1LL, 1000LL, 10000000LL}) {
    ZB_ASSERT_OK(spin_cuda_cycles(cycles, nullptr, spun));
    long long got = 0;
    ASSERT_EQ(cudaMemcpy(&got, spun, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_GE(got, cycles);  // the kernel leaves only once its own counter has passed them
  }
  cudaFree(spun);
  ZB_ASSERT_OK(spin_cuda(1e-3, nullptr));  // the calibrated form queues and completes
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace zb
