// The CPU optimizer kernels against the double-precision references, on random and edge values.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/optimizer.h"
#include "tests/unit/random_values.h"

namespace zb {
namespace {

// Bound: the kernels do about ten FP32 operations per element (with or without FMA contraction,
// depending on the CPU), each rounding by at most half an FP32 ulp, u = 2^-24, relative to the
// magnitude of its operands; the reference rounds only when it stores. 8 u relative to the
// magnitude of the terms that make up each result (not the result itself, which can cancel to
// near zero) covers that with margin: the largest error measured over 1M random elements is
// 2.7 u on master and 2 u on m and v. kTiny absorbs results in the subnormal range, where an
// ulp is absolute.
constexpr double kU = 1.0 / (1 << 24);
constexpr double kTolUlps = 8;
constexpr double kTiny = 8 * double(FLT_MIN);

struct State {
  std::vector<float> master, m, v;
  std::vector<Bf16> weights;
};

struct Grads {
  DType dtype;
  std::vector<float> f32;
  std::vector<Bf16> bf16;
  const void* data() const { return dtype == DType::f32 ? (const void*)f32.data() : bf16.data(); }
  // The value the kernel sees, before grad_scale.
  double at(size_t i) const {
    return dtype == DType::f32 ? double(f32[i]) : double(bf16_to_float(bf16[i]));
  }
};

Grads make_grads(DType dtype, const std::vector<float>& values) {
  Grads g{dtype, values, {}};
  for (float x : values) g.bf16.push_back(float_to_bf16(x));
  return g;
}

State random_state(size_t n, std::mt19937& rng) {
  return {random_values(n, -1, 1, rng), random_values(n, -0.1f, 0.1f, rng),
          random_values(n, 0, 0.01f, rng), std::vector<Bf16>(n)};
}

bool near(double got, double want, double tol) {
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= tol;
}

// Weights: bit-exact round-to-nearest-even of the kernel's own master, and within one BF16 ulp
// of the reference's weights (they differ only where the two masters straddle a rounding tie).
void expect_weights(const State& got, const State& want, size_t i) {
  ASSERT_EQ(got.weights[i].bits, float_to_bf16(got.master[i]).bits) << "element " << i;
  if (got.weights[i].bits == want.weights[i].bits) return;
  EXPECT_NE(got.master[i], want.master[i]) << "element " << i;
  double a = bf16_to_float(got.weights[i]), b = bf16_to_float(want.weights[i]);
  double bf16_ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(a), std::fabs(b))) - 7);
  EXPECT_LE(std::fabs(a - b), bf16_ulp) << "element " << i;
}

// Runs one Adam step per entry of `grad_steps` on the kernel and on the reference, from the
// same start, each keeping its own state. The per-element error budgets carry across steps:
// each step adds its own rounding (tol times the magnitudes of its terms) to the errors it
// inherits from the state, propagated through the update.
void run_adam(const std::vector<std::vector<float>>& grad_steps, DType dtype, State start,
              AdamParams p, int threads) {
  const double tol = kTolUlps * kU, decay = 1 - double(p.lr) * p.weight_decay;
  const size_t n = start.master.size();
  State got = start, want = start;
  std::vector<double> em(n, 0), ev(n, 0), ew(n, 0);
  for (const std::vector<float>& values : grad_steps) {
    Grads g = make_grads(dtype, values);
    State before = want;
    adam_cpu(g.data(), dtype, got.master.data(), got.m.data(), got.v.data(), got.weights.data(), n,
             p, threads);
    adam_reference(g.data(), dtype, want.master.data(), want.m.data(), want.v.data(),
                   want.weights.data(), n, p);
    const double bc1 = 1 - std::pow(double(p.beta1), double(p.step));
    const double bc2 = 1 - std::pow(double(p.beta2), double(p.step));
    for (size_t i = 0; i < n; ++i) {
      double gs = g.at(i) * p.grad_scale;
      double m_terms = p.beta1 * std::fabs(before.m[i]) + (1 - double(p.beta1)) * std::fabs(gs);
      em[i] = p.beta1 * em[i] + tol * m_terms + kTiny;
      ev[i] = p.beta2 * ev[i] + tol * (p.beta2 * before.v[i] + (1 - p.beta2) * gs * gs) + kTiny;
      double root = std::sqrt(double(want.v[i]) / bc2), denom = root + p.eps;
      // d(m / denom) = dm / denom - m / denom^2 * d(root), with d(root) = dv / (2 bc2 root).
      double inherited = em[i] / denom;
      if (root > 0 && std::isfinite(root))
        inherited += std::fabs(want.m[i]) / (denom * denom) * ev[i] / (2 * bc2 * root);
      double terms = decay * std::fabs(before.master[i]) + p.lr / bc1 * m_terms / denom;
      ew[i] = decay * ew[i] + tol * terms + p.lr / bc1 * inherited + kTiny;
      ASSERT_TRUE(near(got.m[i], want.m[i], em[i])) << "m[" << i << "] step " << p.step;
      ASSERT_TRUE(near(got.v[i], want.v[i], ev[i])) << "v[" << i << "] step " << p.step;
      ASSERT_TRUE(near(got.master[i], want.master[i], ew[i]))
          << "master[" << i << "] " << got.master[i] << " vs " << want.master[i] << " step "
          << p.step << " " << dtype_name(dtype);
      ASSERT_NO_FATAL_FAILURE(expect_weights(got, want, i));
    }
    ++p.step;
  }
}

void run_momentum(const std::vector<std::vector<float>>& grad_steps, DType dtype, State start,
                  MomentumParams p, int threads) {
  const double tol = kTolUlps * kU, decay = 1 - double(p.lr) * p.weight_decay;
  State got = start, want = start;
  size_t n = start.master.size();
  std::vector<double> em(n, 0), ew(n, 0);
  for (const std::vector<float>& values : grad_steps) {
    Grads g = make_grads(dtype, values);
    State before = want;
    momentum_cpu(g.data(), dtype, got.master.data(), got.m.data(), got.weights.data(), n, p,
                 threads);
    momentum_reference(g.data(), dtype, want.master.data(), want.m.data(), want.weights.data(), n,
                       p);
    for (size_t i = 0; i < n; ++i) {
      double m_terms = p.beta * std::fabs(before.m[i]) + std::fabs(g.at(i) * p.grad_scale);
      em[i] = p.beta * em[i] + tol * m_terms + kTiny;
      ew[i] = decay * ew[i] + tol * (decay * std::fabs(before.master[i]) + p.lr * m_terms) +
              p.lr * em[i] + kTiny;
      ASSERT_TRUE(near(got.m[i], want.m[i], em[i])) << "m[" << i << "]";
      ASSERT_TRUE(near(got.master[i], want.master[i], ew[i])) << "master[" << i << "]";
      ASSERT_NO_FATAL_FAILURE(expect_weights(got, want, i));
    }
  }
}

const DType kDTypes[] = {DType::bf16, DType::f32};

TEST(OptimizerKernels, AdamRandomOddSizes) {
  std::mt19937 rng(1);
  AdamParams p;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.25f;
  for (size_t n : {size_t(1), size_t(7), size_t(16), size_t(17), size_t(1001), size_t(100003)})
    for (DType dt : kDTypes)
      for (int threads : {1, 2, 3, 0})
        run_adam({random_values(n, -2, 2, rng)}, dt, random_state(n, rng), p, threads);
}

TEST(OptimizerKernels, AdamEdgeGradients) {
  std::mt19937 rng(2);
  const size_t n = 1001;
  for (float scale : {0.0f, 1e-30f, 1e-20f, 1e18f, 1e30f})
    for (int64_t step : {int64_t(1), int64_t(10), int64_t(1000000)})
      for (DType dt : kDTypes) {
        AdamParams p;
        p.step = step;
        p.weight_decay = 0.01f;
        run_adam({random_values(n, -scale, scale, rng)}, dt, random_state(n, rng), p, 2);
      }
}

TEST(OptimizerKernels, AdamFirstStepFromZeroState) {
  // Zero gradients on fresh state: m = v = 0, the update is 0 / eps, master stays as it is.
  const size_t n = 333;
  std::mt19937 rng(3);
  State s{random_values(n, -1, 1, rng), std::vector<float>(n), std::vector<float>(n),
          std::vector<Bf16>(n)};
  State got = s;
  std::vector<Bf16> zeros(n, Bf16{0});
  adam_cpu(zeros.data(), DType::bf16, got.master.data(), got.m.data(), got.v.data(),
           got.weights.data(), n, AdamParams(), 0);
  EXPECT_EQ(got.master, s.master);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(got.weights[i].bits, float_to_bf16(s.master[i]).bits);
}

TEST(OptimizerKernels, AdamMultiStep) {
  std::mt19937 rng(4);
  const size_t n = 4099;
  std::vector<std::vector<float>> steps;
  for (int s = 0; s < 30; ++s) steps.push_back(random_values(n, -1, 1, rng));
  AdamParams p;
  p.weight_decay = 0.05f;
  for (DType dt : kDTypes) run_adam(steps, dt, random_state(n, rng), p, 0);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool same_bits(const State& a, const State& b) {
  return same_bits(a.master, b.master) && same_bits(a.m, b.m) && same_bits(a.v, b.v) &&
         same_bits(a.weights, b.weights);
}

TEST(OptimizerKernels, SameBitsForAnySplitOrThreadCount) {
  // ZeRO stages shard the same flat buffer differently; an element's result must not depend on
  // where its shard or its thread's chunk starts, so that stages compare bit for bit.
  std::mt19937 rng(5);
  const size_t n = 200001;
  const State start = random_state(n, rng);
  const Grads g = make_grads(DType::bf16, random_values(n, -1, 1, rng));
  AdamParams ap;
  ap.weight_decay = 0.1f;
  MomentumParams mp;
  mp.weight_decay = 0.1f;
  State adam_first, momentum_first;
  for (std::vector<size_t> cuts : {std::vector<size_t>{0}, {0, 1, 18, 1000, 99999}, {0, 7, 150001}})
    for (int threads : {1, 3}) {
      State a = start, b = start;
      cuts.push_back(n);
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        size_t lo = cuts[k], len = cuts[k + 1] - lo;
        adam_cpu(g.bf16.data() + lo, DType::bf16, a.master.data() + lo, a.m.data() + lo,
                 a.v.data() + lo, a.weights.data() + lo, len, ap, threads);
        momentum_cpu(g.bf16.data() + lo, DType::bf16, b.master.data() + lo, b.m.data() + lo,
                     b.weights.data() + lo, len, mp, threads);
      }
      if (adam_first.master.empty()) adam_first = a, momentum_first = b;
      EXPECT_TRUE(same_bits(a, adam_first)) << cuts.size() - 1 << " pieces, " << threads;
      EXPECT_TRUE(same_bits(b, momentum_first)) << cuts.size() - 1 << " pieces, " << threads;
    }
}

TEST(OptimizerKernels, MomentumRandomEdgeAndMultiStep) {
  std::mt19937 rng(6);
  MomentumParams p;
  p.weight_decay = 0.1f;
  p.grad_scale = 0.5f;
  for (size_t n : {size_t(1), size_t(7), size_t(1001), size_t(100003)})
    for (DType dt : kDTypes)
      run_momentum({random_values(n, -2, 2, rng)}, dt, random_state(n, rng), p, 0);
  for (float scale : {0.0f, 1e-30f, 1e30f})
    for (DType dt : kDTypes)
      run_momentum({random_values(1001, -scale, scale, rng)}, dt, random_state(1001, rng), p, 2);
  std::vector<std::vector<float>> steps;
  for (int s = 0; s < 30; ++s) steps.push_back(random_values(4099, -1, 1, rng));
  for (DType dt : kDTypes) run_momentum(steps, dt, random_state(4099, rng), p, 0);
}

TEST(OptimizerKernels, WeightsRoundExactlyLikeFloatToBf16) {
  // lr = 0 leaves master as it is, so the weights are the vectorised rounding of chosen bit
  // patterns: ties (low half 0x8000) both ways, carries into the exponent, subnormals,
  // infinities and NaNs with payloads that would round to infinity if not quieted.
  std::vector<float> master;
  for (uint32_t hi : {0x0000u, 0x0001u, 0x3f80u, 0x3f81u, 0x7f7fu, 0x7f80u, 0x7fc0u, 0x8000u,
                      0x807fu, 0xbf80u, 0xff7fu, 0xff80u, 0xffbfu})
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      master.push_back(bits_float((hi << 16) | lo));
  for (uint32_t k = 0; k < 100000; ++k) master.push_back(bits_float(k * 42949u + 12345u));
  size_t n = master.size();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::vector<Bf16> w(n), zeros(n, Bf16{0});
  MomentumParams mp;
  mp.lr = 0.0f;
  std::vector<float> mm = master;
  momentum_cpu(zeros.data(), DType::bf16, mm.data(), m.data(), w.data(), n, mp, 0);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(float_bits(mm[i]) | 0x00400000u * std::isnan(mm[i]),
              float_bits(master[i]) | 0x00400000u * std::isnan(master[i]));
    ASSERT_EQ(w[i].bits, float_to_bf16(mm[i]).bits) << std::hex << float_bits(mm[i]);
  }
  AdamParams ap;
  ap.lr = 0.0f;
  std::vector<float> am = master;
  adam_cpu(zeros.data(), DType::bf16, am.data(), m.data(), v.data(), w.data(), n, ap, 0);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(w[i].bits, float_to_bf16(am[i]).bits) << std::hex << float_bits(am[i]);
}

TEST(DType, NamesSizesAndParsing) {
  DType t = DType::f32;
  EXPECT_TRUE(parse_dtype("bf16", &t) && t == DType::bf16);
  EXPECT_TRUE(parse_dtype("fp32", &t) && t == DType::f32);
  EXPECT_FALSE(parse_dtype("float", &t));
  EXPECT_FALSE(parse_dtype("", &t));
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  EXPECT_STREQ(dtype_name(DType::f32), "fp32");
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f32), 4u);
}

}  // namespace
}  // namespace zb
