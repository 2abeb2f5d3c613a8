// Block quantization: the error bounds of quant_math.h on random and extreme values, exact codes
// and packing, all-zero blocks, and the CPU kernels' bits against the reference for any thread
// count.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/test_quantize_values.h"

namespace zb {
namespace {

constexpr QuantFormat kBlockFormats[] = {QuantFormat::int8, QuantFormat::int4};

std::vector<float> dequantized(const Quantized& q, size_t n, QuantFormat f, size_t block, DType dtype) {
  std::vector<float> out(n);
  std::vector<Bf16> half(n);
  block_dequantize_reference(q.codes.data(), q.scales.data(), n, f, block,
                             dtype == DType::f32 ? (void*)out.data() : half.data(), dtype);
  if (dtype == DType::bf16)
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(half[i]);
  return out;
}

// Counts the elements outside the bounds: |x - q s| as exact arithmetic has it (q s is exact in
// double, and its difference from a float rounds far inside the bound's margin), and
// |x - dequantized| as `dtype`. Also checks that the largest element of every block takes the
// extreme code.
int64_t outside_bounds(const QuantInput& x, const Quantized& q, QuantFormat f, size_t block, DType out) {
  const size_t n = x.size();
  std::vector<float> dq = dequantized(q, n, f, block, out);
  int64_t bad = 0;
  for (size_t b = 0; b < quant_blocks(n, block); ++b) {
    const float s = q.scales[b];
    double amax = 0;
    int top = 0;
    for (size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      const double xi = x.at(i), qs = double(code_of(q.codes, f, i)) * double(s);
      bad += std::fabs(xi - qs) > block_code_error_bound(f, s);
      bad += std::fabs(xi - double(dq[i])) > block_error_bound(f, s, out);
      if (std::fabs(xi) > amax) amax = std::fabs(xi), top = std::abs(code_of(q.codes, f, i));
    }
    if (amax >= 0x1p-100) {
      EXPECT_EQ(top, quant_qmax(f)) << "block " << b;
    }
  }
  return bad;
}

// Quantizes with the reference, checks the bounds, then requires the CPU kernels to give the
// same bytes for every thread count, dequantized output included.
void check_block_round_trip(const std::vector<float>& values, QuantFormat f, size_t block) {
  const size_t n = values.size();
  for (DType dtype : kQuantDTypes) {
    SCOPED_TRACE(quant_trace(f, dtype, n, block));
    const QuantInput x = make_quant_input(dtype, values);
    Quantized ref(f, n, block);
    block_quantize_reference(x.data(), dtype, n, f, block, ref.codes.data(), ref.scales.data());
    if (f == QuantFormat::int4 && n % 2) {
      EXPECT_EQ(ref.codes.back() >> 4, 0) << "last high nibble";
    }
    EXPECT_EQ(outside_bounds(x, ref, f, block, dtype), 0);
    std::vector<uint8_t> want_out(n * dtype_size(dtype));
    block_dequantize_reference(ref.codes.data(), ref.scales.data(), n, f, block, want_out.data(), dtype);
    for (int threads : kQuantThreadCounts) {
      Quantized cpu(f, n, block);
      block_quantize_cpu(x.data(), dtype, n, f, block, cpu.codes.data(), cpu.scales.data(), threads);
      ASSERT_EQ(cpu.codes, ref.codes) << "threads " << threads;
      ASSERT_EQ(0, std::memcmp(cpu.scales.data(), ref.scales.data(), ref.scales.size() * 4)) << threads;
      std::vector<uint8_t> out(n * dtype_size(dtype), 0x55);
      block_dequantize_cpu(ref.codes.data(), ref.scales.data(), n, f, block, out.data(), dtype, threads);
      ASSERT_EQ(out, want_out) << "threads " << threads;
    }
  }
}

TEST(BlockQuantize, RandomValuesStayWithinHalfAStepAndCpuMatchesReference) {
  std::mt19937 rng(1);
  // Odd sizes, sizes smaller than one block, and partial last blocks.
  for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(4095), size_t(4097), size_t(10001)})
    for (QuantFormat f : kBlockFormats)
      for (size_t block : {size_t(2), size_t(32), size_t(4096)})
        check_block_round_trip(varied_values(n, rng), f, block);
  // An odd block for INT8, which packs nothing.
  check_block_round_trip(varied_values(1001, rng), QuantFormat::int8, 33);
}

TEST(BlockQuantize, CpuMatchesReferenceWhenTheWorkIsSplitAcrossThreads) {
  // Large enough that every thread count above gets several blocks per thread.
  std::mt19937 rng(2);
  for (QuantFormat f : kBlockFormats) check_block_round_trip(varied_values(600001, rng), f, 4096);
  check_block_round_trip(varied_values(300001, rng), QuantFormat::int4, 64);
}

TEST(BlockQuantize, TheBoundCatchesACodeTwoStepsOff) {
  // The checks above must be able to fail. A code two steps away is at least 1.5 steps from x
  // whatever x's own rounding, so it breaks both bounds.
  std::mt19937 rng(3);
  const QuantInput x = make_quant_input(DType::f32, random_values(100, -1, 1, rng));
  for (QuantFormat f : kBlockFormats) {
    Quantized q(f, 100, 32);
    block_quantize_reference(x.data(), DType::f32, 100, f, 32, q.codes.data(), q.scales.data());
    ASSERT_EQ(outside_bounds(x, q, f, 32, DType::f32), 0);
    size_t i = 40;  // not its block's largest, whose code a check of its own watches
    while (std::abs(code_of(q.codes, f, i)) == quant_qmax(f)) ++i;
    const int code = code_of(q.codes, f, i), moved = code >= 2 ? code - 2 : code + 2;
    if (f == QuantFormat::int8) q.codes[i] = int8_byte(moved);
    else if (i % 2 == 0) q.codes[i / 2] = int4_pack(moved, int4_hi(q.codes[i / 2]));
    else q.codes[i / 2] = int4_pack(int4_lo(q.codes[i / 2]), moved);
    EXPECT_EQ(outside_bounds(x, q, f, 32, DType::f32), 2) << quant_format_name(f);
  }
}

TEST(BlockQuantize, ExactCodesPackingAndTiesToEven) {
  // amax 7 and 127 make the step exactly 1, so the codes are the rounded values themselves.
  const std::vector<float> v4 = {1, -2, 7, -7, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f};
  Quantized q4(QuantFormat::int4, v4.size(), 10);
  block_quantize_reference(v4.data(), DType::f32, v4.size(), QuantFormat::int4, 10, q4.codes.data(), q4.scales.data());
  EXPECT_EQ(q4.scales[0], 1.0f);
  // Pairs in byte order, the earlier element low; ties to even (0.5 -> 0, 1.5 -> 2, 2.5 -> 2);
  // the odd last element leaves its high nibble 0.
  EXPECT_EQ(q4.codes, (std::vector<uint8_t>{0xe1, 0x97, 0x20, 0x02, 0x0e}));
  const std::vector<float> v8 = {127, -127, 3, -0.5f, 126.5f};
  Quantized q8(QuantFormat::int8, v8.size(), 8);
  block_quantize_reference(v8.data(), DType::f32, v8.size(), QuantFormat::int8, 8, q8.codes.data(), q8.scales.data());
  EXPECT_EQ(q8.scales[0], 1.0f);
  EXPECT_EQ(q8.codes, (std::vector<uint8_t>{0x7f, 0x81, 0x03, 0x00, 0x7e}));
  // Every nibble decodes to its two's complement value.
  for (int c = -8; c < 8; ++c) {
    EXPECT_EQ(int4_lo(int4_pack(c, 5)), c);
    EXPECT_EQ(int4_hi(int4_pack(5, c)), c);
  }
}

TEST(BlockQuantize, AllZeroBlocksGiveZeroScalesCodesAndValues) {
  std::vector<float> v(100, 0.0f);
  v[50] = -0.0f;
  for (size_t i = 64; i < 96; ++i) v[i] = float(i) - 80;  // one non-zero block among zero ones
  for (QuantFormat f : kBlockFormats) {
    check_block_round_trip(v, f, 32);
    Quantized q(f, v.size(), 32);
    block_quantize_reference(v.data(), DType::f32, v.size(), f, 32, q.codes.data(), q.scales.data());
    for (size_t b : {0, 1, 3}) EXPECT_EQ(q.scales[b], 0.0f);
    std::vector<float> dq = dequantized(q, v.size(), f, 32, DType::f32);
    for (size_t i = 0; i < 64; ++i) EXPECT_EQ(float_bits(dq[i]), 0u) << i;  // +0, not NaN
  }
}

TEST(BlockQuantize, ExtremeValuesStayWithinTheBound) {
  // Blocks of 4: the largest floats, the FP32 and BF16 limits, subnormals, the smallest
  // subnormal alone, amaxes either side of the 2^-64 rescaling, and mixed magnitudes.
  const float tiny = std::ldexp(1.0f, -149);
  const std::vector<float> v = {
      FLT_MAX, -FLT_MAX, 1.0f, -3e38f,
      bf16_to_float(Bf16{0x7f7f}), -1e38f, 0.0f, 1e-30f,
      FLT_MIN, -FLT_MIN / 3, 1e-40f, -1e-44f,
      tiny, 0.0f, -tiny, tiny,
      0x1p-64f, -0x1p-65f, 0x1p-70f, 0x1.fffffep-65f,
      0x1.fffffep-65f, -0x1p-80f, 0x1p-100f, 0x1p-126f,
      1e30f, -1e-30f, 1.0f, 65504.0f};
  for (QuantFormat f : kBlockFormats) check_block_round_trip(v, f, 4);
  // The dequantized largest value saturates at FLT_MAX instead of overflowing.
  Quantized q(QuantFormat::int8, 4, 4);
  block_quantize_reference(v.data(), DType::f32, 4, QuantFormat::int8, 4, q.codes.data(), q.scales.data());
  std::vector<float> dq = dequantized(q, 4, QuantFormat::int8, 4, DType::f32);
  EXPECT_EQ(dq[0], FLT_MAX);
  EXPECT_EQ(dq[1], -FLT_MAX);
}

TEST(BlockQuantize, EmptyBuffersTouchNothing) {
  // n = 0 (a rank with an empty shard): no block, no byte read or written, null pointers fine.
  for (QuantFormat f : kBlockFormats) {
    block_quantize_cpu(nullptr, DType::bf16, 0, f, 64, nullptr, nullptr, 0);
    block_dequantize_cpu(nullptr, nullptr, 0, f, 64, nullptr, DType::f32, 0);
    block_reduce_cpu(QuantInputs{nullptr, 0, nullptr, 0, 3}, 0, f, 64, nullptr, nullptr, 0);
  }
  EXPECT_EQ(fp8_amax_cpu(nullptr, DType::bf16, 0, 0), 0.0f);
  fp8_quantize_cpu(nullptr, DType::f32, 0, 1.0f, nullptr, 0);
  fp8_dequantize_cpu(nullptr, 0, 1.0f, nullptr, DType::bf16, 0);
}

TEST(BlockQuantize, BlockSizesAndByteModels) {
  EXPECT_TRUE(quant_block_ok(QuantFormat::int8, 1));
  EXPECT_TRUE(quant_block_ok(QuantFormat::int8, 33));
  EXPECT_FALSE(quant_block_ok(QuantFormat::int4, 33));
  EXPECT_FALSE(quant_block_ok(QuantFormat::int8, 0));
  EXPECT_FALSE(quant_block_ok(QuantFormat::fp8, 4096));
  EXPECT_EQ(quant_code_bytes(QuantFormat::int4, 7), 4u);
  EXPECT_EQ(quant_blocks(4097, 4096), 2u);
  // BF16 in, a byte out, a 4-byte scale per 4096 elements.
  EXPECT_DOUBLE_EQ(quantize_bytes_per_elem(QuantFormat::int8, DType::bf16, 4096), 3 + 1.0 / 1024);
  EXPECT_DOUBLE_EQ(quantize_bytes_per_elem(QuantFormat::int4, DType::f32, 4096), 4.5 + 1.0 / 1024);
  EXPECT_DOUBLE_EQ(quantize_bytes_per_elem(QuantFormat::fp8, DType::bf16, 0), 5.0);
  EXPECT_DOUBLE_EQ(dequantize_bytes_per_elem(QuantFormat::int4, DType::bf16, 2048), 2.5 + 1.0 / 512);
  EXPECT_DOUBLE_EQ(dequantize_bytes_per_elem(QuantFormat::fp8, DType::f32, 0), 5.0);
  EXPECT_DOUBLE_EQ(reduce_bytes_per_elem(QuantFormat::int4, 8, 4096), 9 * (0.5 + 1.0 / 1024));
}

}  // namespace
}  // namespace zb
