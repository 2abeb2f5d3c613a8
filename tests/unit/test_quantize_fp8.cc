// FP8 E4M3: the cast against a brute-force nearest value, saturation and NaN, torchao's scale,
// the round trip's bound, and the CPU kernels' bits against the reference for any thread count.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/unit/test_quantize_values.h"

namespace zb {
namespace {

// E4M3 by its definition, independent of the kernels' bit manipulation: bias 7, exponent field
// 0 for the subnormals m * 2^-9, and 0x7f / 0xff NaN.
bool e4m3_is_nan(int c) { return (c & 0x7f) == 0x7f; }
double e4m3_definition(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return c & 0x80 ? -mag : mag;
}

// The code the cast must give: the nearest value of v's sign, beyond +-448 the largest, a tie
// to the code with an even mantissa (its lowest bit 0), NaN to NaN.
uint8_t nearest_e4m3(float v) {
  const int sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return uint8_t(sign | 0x7f);
  const double x = std::min(448.0, std::fabs(double(v)));
  int best = 0;
  for (int c = 1; c < 0x7f; ++c) {
    const double d = std::fabs(x - e4m3_definition(c)), b = std::fabs(x - e4m3_definition(best));
    if (d < b || (d == b && c % 2 == 0)) best = c;
  }
  return uint8_t(sign | best);
}

TEST(Fp8, DecodesEveryCodeAndCastsItBack) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_float(uint8_t(c));
    if (e4m3_is_nan(c)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(double(v), e4m3_definition(c)) << c;
    EXPECT_EQ(std::signbit(v), c >= 0x80) << c;
    EXPECT_EQ(float_to_e4m3(v), c) << c;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);
}

TEST(Fp8, CastRoundsToNearestEvenAndSaturates) {
  std::vector<float> probes;
  // Every exact tie between neighbouring codes, and the floats either side of it.
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = float((e4m3_definition(c) + e4m3_definition(c + 1)) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) {
      probes.push_back(v);
      probes.push_back(-v);
    }
  }
  // Random magnitudes from far below the subnormals to beyond the largest value.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1, 2);
  std::uniform_int_distribution<int> exponent(-14, 9);
  for (int i = 0; i < 100000; ++i) probes.push_back(std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1 : 1));
  for (float v : probes) ASSERT_EQ(float_to_e4m3(v), nearest_e4m3(v)) << v;
  // Saturation: the tie between 448 and 480 (NaN in this format), anything larger, infinity.
  for (float v : {464.0f, 479.0f, 1e30f, FLT_MAX, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(float_to_e4m3(v), 0x7e) << v;
    EXPECT_EQ(float_to_e4m3(-v), 0xfe) << v;
  }
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7f);
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
}

TEST(Fp8, ScaleIsTorchaosAmaxToScale) {
  EXPECT_EQ(fp8_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8_scale(1.0f), 448.0f);
  EXPECT_EQ(fp8_scale(3.0f), float(448.0 / 3.0));
  // The amax is clamped below at 1e-12 in FP32 before the division, so zero stays finite.
  EXPECT_EQ(fp8_scale(0.0f), float(448.0 / double(1e-12f)));
  EXPECT_EQ(fp8_scale(1e-20f), fp8_scale(0.0f));
}

// Elements of the round trip outside fp8_error_bound.
int64_t fp8_outside_bounds(const QuantInput& x, const std::vector<uint8_t>& codes, float amax, DType out) {
  const size_t n = x.size();
  const float scale = fp8_scale(amax);
  std::vector<uint8_t> raw(n * dtype_size(out));
  fp8_dequantize_reference(codes.data(), n, amax, raw.data(), out);
  int64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float dq = out == DType::f32 ? reinterpret_cast<const float*>(raw.data())[i]
                                       : bf16_to_float(reinterpret_cast<const Bf16*>(raw.data())[i]);
    bad += std::fabs(double(x.at(i)) - double(dq)) > fp8_error_bound(x.at(i), scale, out);
  }
  return bad;
}

// Each code (the first 2000) is the brute-force cast of fl(x * scale), and the largest element
// takes the largest code.
void expect_fp8_codes(const QuantInput& x, const std::vector<uint8_t>& codes, float amax) {
  const float scale = fp8_scale(amax);
  for (size_t i = 0; i < x.size(); ++i) {
    if (i < 2000) {
      EXPECT_EQ(codes[i], nearest_e4m3(x.at(i) * scale)) << i;
    }
    if (std::fabs(x.at(i)) == amax && amax > 0) {
      EXPECT_EQ(codes[i] & 0x7f, 0x7e) << i;
    }
  }
}

void check_fp8_round_trip(const std::vector<float>& values) {
  const size_t n = values.size();
  for (DType dtype : kQuantDTypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
    const QuantInput x = make_quant_input(dtype, values);
    const float amax = fp8_amax_reference(x.data(), dtype, n);
    std::vector<uint8_t> ref(n, 0xaa);
    fp8_quantize_reference(x.data(), dtype, n, amax, ref.data());
    EXPECT_EQ(fp8_outside_bounds(x, ref, amax, dtype), 0);
    expect_fp8_codes(x, ref, amax);
    std::vector<uint8_t> want(n * dtype_size(dtype));
    fp8_dequantize_reference(ref.data(), n, amax, want.data(), dtype);
    for (int threads : kQuantThreadCounts) {
      const float got_amax = fp8_amax_cpu(x.data(), dtype, n, threads);
      ASSERT_EQ(float_bits(got_amax), float_bits(amax)) << "threads " << threads;
      std::vector<uint8_t> codes(n, 0x55);
      fp8_quantize_cpu(x.data(), dtype, n, amax, codes.data(), threads);
      ASSERT_EQ(codes, ref) << "threads " << threads;
      std::vector<uint8_t> out(n * dtype_size(dtype), 0x55);
      fp8_dequantize_cpu(ref.data(), n, amax, out.data(), dtype, threads);
      ASSERT_EQ(out, want) << "threads " << threads;
    }
  }
}

TEST(Fp8, RoundTripWithinBoundAndCpuMatchesReference) {
  std::mt19937 rng(8);
  for (size_t n : {size_t(1), size_t(7), size_t(1001), size_t(300001)}) check_fp8_round_trip(varied_values(n, rng));
  // Values spread over a range FP8 cannot hold: the small ones fall into the subnormals or to 0.
  std::vector<float> wide;
  for (int e = -40; e <= 40; ++e) wide.push_back(std::ldexp(e % 2 ? -1.3f : 1.7f, e));
  check_fp8_round_trip(wide);
  check_fp8_round_trip(std::vector<float>(50, 0.0f));  // amax 0: the clamped scale, all codes 0
}

TEST(Fp8, TheBoundCatchesACodeTwoStepsOff) {
  // The bound must be able to fail. Two mantissa steps (within one binade) put the value at
  // least 1.5 steps from x, whatever x's own rounding, and a step is over 1/16 of |x|.
  std::mt19937 rng(9);
  const QuantInput x = make_quant_input(DType::f32, random_values(100, -1, 1, rng));
  const float amax = fp8_amax_reference(x.data(), DType::f32, 100);
  std::vector<uint8_t> codes(100);
  fp8_quantize_reference(x.data(), DType::f32, 100, amax, codes.data());
  ASSERT_EQ(fp8_outside_bounds(x, codes, amax, DType::f32), 0);
  codes[10] = uint8_t((codes[10] & 7) >= 2 ? codes[10] - 2 : codes[10] + 2);
  EXPECT_EQ(fp8_outside_bounds(x, codes, amax, DType::f32), 1);
}

TEST(Fp8, AStaleAmaxSaturatesInsteadOfOverflowing) {
  // An amax below the tensor's own (a scale computed before an update): 4 x 448 saturates.
  const std::vector<float> x = {4.0f, -4.0f, 0.5f};
  std::vector<uint8_t> codes(3);
  fp8_quantize_reference(x.data(), DType::f32, 3, 1.0f, codes.data());
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x7e, 0xfe, float_to_e4m3(224.0f)}));
  std::vector<float> back(3);
  fp8_dequantize_reference(codes.data(), 3, 1.0f, back.data(), DType::f32);
  EXPECT_EQ(back, (std::vector<float>{1.0f, -1.0f, 0.5f}));
}

}  // namespace
}  // namespace zb
