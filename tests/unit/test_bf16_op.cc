// The MPI BF16 sum against an independent reference: the exact sum rounded to the nearest
// BF16 by searching its two neighbours, ties to even, on awkward values.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "harness/comm/mpi_ops.h"
#include "harness/core/bf16.h"

namespace {

uint16_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}
float from_bits(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Independent of float_to_bf16's bit trick: the candidates below and above, compared in
// double precision, where the FP32 sum of two BF16 values is exact.
uint16_t reference_round(double x) {
  if (std::isnan(x)) return 0x7fc0;
  float xf = float(x);  // exact: two BF16s sum exactly in FP32 unless it overflows
  if (std::isinf(xf)) return bits_of(xf);
  uint16_t lo = bits_of(xf);  // truncation toward zero
  double lo_v = from_bits(lo);
  if (lo_v == x) return lo;
  uint16_t hi = uint16_t(lo + 1);  // next magnitude up (may be infinity)
  double hi_v = from_bits(hi);
  double dlo = std::fabs(x - lo_v), dhi = std::fabs(hi_v - x);
  if (std::isinf(hi_v)) {
    // Beyond the largest BF16 by at least half an ulp rounds to infinity.
    double ulp = std::ldexp(1.0, std::ilogb(lo_v) - 7);
    return std::fabs(x) - std::fabs(lo_v) >= ulp / 2 ? hi : lo;
  }
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

void expect_sum(float a, float b) {
  uint16_t in = zb::float_to_bf16(a).bits, inout = zb::float_to_bf16(b).bits;
  double exact = double(from_bits(in)) + double(from_bits(inout));
  int len = 1;
  MPI_Datatype type = MPI_UINT16_T;
  zb::bf16_sum(&in, &inout, &len, &type);
  uint16_t want = reference_round(exact);
  if (std::isnan(exact)) {
    EXPECT_TRUE(std::isnan(from_bits(inout))) << a << " + " << b;
  } else {
    EXPECT_EQ(inout, want) << a << " + " << b << " = " << exact;
  }
}

}  // namespace

TEST(Bf16Sum, AwkwardValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = from_bits(0x7f7f);  // largest finite BF16
  const float tiny = from_bits(0x0001);  // smallest subnormal BF16
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.0f + 1.0f / 256, 3.0f, 0.1f,
                               1e-3f, -7.5f, 255.0f, 256.0f, 257.0f, big, -big, tiny, -tiny,
                               from_bits(0x0080), 1e30f, -1e30f, inf, -inf};
  for (float a : values)
    for (float b : values) expect_sum(a, b);
}

TEST(Bf16Sum, HalfwayCasesRoundToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: even is 1.
  expect_sum(1.0f, 1.0f / 256);
  uint16_t in = zb::float_to_bf16(1.0f / 256).bits, inout = zb::float_to_bf16(1.0f).bits;
  int len = 1;
  MPI_Datatype type = MPI_UINT16_T;
  zb::bf16_sum(&in, &inout, &len, &type);
  EXPECT_EQ(from_bits(inout), 1.0f);
  // 1 + 2^-7 + 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  in = zb::float_to_bf16(1.0f / 256).bits;
  inout = zb::float_to_bf16(1.0f + 1.0f / 128).bits;
  zb::bf16_sum(&in, &inout, &len, &type);
  EXPECT_EQ(from_bits(inout), 1.0f + 1.0f / 64);
}

TEST(Bf16Sum, OverflowAndNan) {
  expect_sum(from_bits(0x7f7f), from_bits(0x7f7f));
  uint16_t in = 0x7fc1, inout = zb::float_to_bf16(1.0f).bits;  // NaN with payload
  int len = 1;
  MPI_Datatype type = MPI_UINT16_T;
  zb::bf16_sum(&in, &inout, &len, &type);
  EXPECT_TRUE(std::isnan(from_bits(inout)));
}

TEST(Bf16Sum, RandomValuesOverManyElements) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  std::vector<uint16_t> a(4096), b(4096), want(4096);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = uint16_t(bits(rng));
    b[i] = uint16_t(bits(rng));
    want[i] = reference_round(double(from_bits(a[i])) + double(from_bits(b[i])));
  }
  int len = int(a.size());
  MPI_Datatype type = MPI_UINT16_T;
  zb::bf16_sum(a.data(), b.data(), &len, &type);
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(from_bits(want[i]))) {
      EXPECT_TRUE(std::isnan(from_bits(b[i])));
    } else {
      EXPECT_EQ(b[i], want[i]) << i;
    }
  }
}
