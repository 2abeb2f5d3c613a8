// qgZ's dequantize-reduce-requantize: the CPU kernel's bits against the reference for any thread
// count, strided inputs, the sum's error bound, and one input as a plain requantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/test_quantize_values.h"

namespace zb {
namespace {

// `count` quantized inputs of n elements, as a receive buffer might hold them: at strides with
// gaps between inputs, the gaps filled with bytes (and NaN scales) that would show if read.
struct Inputs {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  QuantInputs view;
};

// Values over many magnitudes, or (`varied` false) all in [-1, 1].
Inputs make_inputs(QuantFormat f, size_t n, size_t block, int count, std::mt19937& rng, bool varied = true) {
  const size_t code_stride = quant_code_bytes(f, n) + 5, scale_stride = quant_blocks(n, block) + 3;
  Inputs in;
  in.codes.assign(code_stride * size_t(count), 0x77);
  in.scales.assign(scale_stride * size_t(count), std::nanf(""));
  for (int j = 0; j < count; ++j) {
    std::vector<float> values = varied ? varied_values(n, rng) : random_values(n, -1, 1, rng);
    block_quantize_reference(values.data(), DType::f32, n, f, block, in.codes.data() + size_t(j) * code_stride,
                             in.scales.data() + size_t(j) * scale_stride);
  }
  in.view = {in.codes.data(), code_stride, in.scales.data(), scale_stride, count};
  return in;
}

// Input j dequantized to FP32.
std::vector<float> input_values(const Inputs& in, int j, size_t n, QuantFormat f, size_t block) {
  std::vector<float> out(n);
  block_dequantize_reference(in.view.codes + size_t(j) * in.view.code_stride,
                             in.view.scales + size_t(j) * in.view.scale_stride, n, f, block, out.data(), DType::f32);
  return out;
}

// Elements whose requantized sum is further from the exact sum of the inputs' values than the
// block bound plus FP32's summation error (count - 1 roundings, each within 2^-24 of the
// partial sums, bounded by the sum of magnitudes).
int64_t outside_sum_bound(const Inputs& in, const Quantized& out, size_t n, QuantFormat f, size_t block) {
  std::vector<double> exact(n, 0), magnitude(n, 0);
  for (int j = 0; j < in.view.count; ++j) {
    std::vector<float> v = input_values(in, j, n, f, block);
    for (size_t i = 0; i < n; ++i) exact[i] += v[i], magnitude[i] += std::fabs(v[i]);
  }
  int64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float s = out.scales[i / block];
    const double got = double(code_of(out.codes, f, i)) * double(s);
    const double bound = block_code_error_bound(f, s) + double(in.view.count) * 0x1p-24 * magnitude[i];
    bad += std::fabs(got - exact[i]) > bound;
  }
  return bad;
}

void check_reduce(QuantFormat f, size_t n, size_t block, int count, std::mt19937& rng) {
  SCOPED_TRACE(quant_trace(f, DType::f32, n, block) + " inputs=" + std::to_string(count));
  const Inputs in = make_inputs(f, n, block, count, rng);
  Quantized ref(f, n, block);
  block_reduce_reference(in.view, n, f, block, ref.codes.data(), ref.scales.data());
  EXPECT_EQ(outside_sum_bound(in, ref, n, f, block), 0);
  for (int threads : kQuantThreadCounts) {
    Quantized cpu(f, n, block);
    block_reduce_cpu(in.view, n, f, block, cpu.codes.data(), cpu.scales.data(), threads);
    ASSERT_EQ(cpu.codes, ref.codes) << "threads " << threads;
    ASSERT_EQ(0, std::memcmp(cpu.scales.data(), ref.scales.data(), ref.scales.size() * 4)) << threads;
  }
}

TEST(BlockReduce, CpuMatchesReferenceAndTheSumStaysWithinTheBound) {
  std::mt19937 rng(11);
  for (QuantFormat f : {QuantFormat::int8, QuantFormat::int4})
    for (int count : {1, 2, 3, 8})
      for (size_t n : {size_t(1), size_t(7), size_t(4097), size_t(10001)})
        for (size_t block : {size_t(2), size_t(64), size_t(4096)}) check_reduce(f, n, block, count, rng);
}

TEST(BlockReduce, CpuMatchesReferenceWhenTheWorkIsSplitAcrossThreads) {
  std::mt19937 rng(12);
  check_reduce(QuantFormat::int4, 300001, 4096, 4, rng);
  check_reduce(QuantFormat::int8, 300001, 128, 3, rng);
}

TEST(BlockReduce, TheBoundCatchesAMissingInput) {
  // The check must be able to fail: the sum of two inputs of like magnitude is far from the
  // sum of three.
  std::mt19937 rng(13);
  const size_t n = 1000, block = 64;
  const Inputs in = make_inputs(QuantFormat::int8, n, block, 3, rng, false);
  Inputs fewer = in;
  fewer.view.codes = fewer.codes.data();
  fewer.view.scales = fewer.scales.data();
  fewer.view.count = 2;
  Quantized out(QuantFormat::int8, n, block);
  block_reduce_reference(fewer.view, n, QuantFormat::int8, block, out.codes.data(), out.scales.data());
  EXPECT_EQ(outside_sum_bound(fewer, out, n, QuantFormat::int8, block), 0);
  EXPECT_GT(outside_sum_bound(in, out, n, QuantFormat::int8, block), int64_t(n / 2));
}

TEST(BlockReduce, OneInputIsItsOwnRequantization) {
  // Summing one input adds it to +0 exactly, so the result is the quantization of its values.
  std::mt19937 rng(14);
  for (QuantFormat f : {QuantFormat::int8, QuantFormat::int4}) {
    const size_t n = 999, block = 100;
    const Inputs in = make_inputs(f, n, block, 1, rng);
    Quantized reduced(f, n, block), direct(f, n, block);
    block_reduce_reference(in.view, n, f, block, reduced.codes.data(), reduced.scales.data());
    std::vector<float> values = input_values(in, 0, n, f, block);
    block_quantize_reference(values.data(), DType::f32, n, f, block, direct.codes.data(), direct.scales.data());
    EXPECT_EQ(reduced.codes, direct.codes);
    EXPECT_EQ(reduced.scales, direct.scales);
  }
}

}  // namespace
}  // namespace zb
