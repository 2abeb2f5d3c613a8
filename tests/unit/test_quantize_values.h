// Test helpers shared by the quantization tests: inputs in FP32 or BF16, values over many
// magnitudes, and reading one code back.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/quantize/quant_math.h"
#include "kernels/quantize/quantize.h"
#include "tests/unit/random_values.h"

namespace zb {

inline constexpr DType kQuantDTypes[] = {DType::f32, DType::bf16};
// 1 and 2 threads, a count that divides nothing evenly, and every hardware thread.
inline constexpr int kQuantThreadCounts[] = {1, 2, 3, 0};

// Values as the kernels see them (FP32, or rounded to BF16) with the raw array to pass in. A
// finite value beyond BF16's range becomes BF16's largest rather than infinity: the kernels
// take finite inputs.
struct QuantInput {
  DType dtype;
  std::vector<float> f32;
  std::vector<Bf16> bf16;
  const void* data() const { return dtype == DType::f32 ? (const void*)f32.data() : bf16.data(); }
  float at(size_t i) const { return f32[i]; }
  size_t size() const { return f32.size(); }
};

inline QuantInput make_quant_input(DType dtype, const std::vector<float>& values) {
  QuantInput in{dtype, values, {}};
  for (float v : values) {
    Bf16 h = float_to_bf16(v);
    if (std::isinf(bf16_to_float(h)) && std::isfinite(v)) h.bits = uint16_t((h.bits & 0x8000u) | 0x7f7fu);
    in.bf16.push_back(h);
  }
  if (dtype == DType::bf16)
    for (size_t i = 0; i < values.size(); ++i) in.f32[i] = bf16_to_float(in.bf16[i]);
  return in;
}

// Random values whose magnitude changes every 100 elements, over 2^-30 .. 2^30, so that blocks
// of every size meet small and large scales alike.
inline std::vector<float> varied_values(size_t n, std::mt19937& rng) {
  std::vector<float> v = random_values(n, -1, 1, rng);
  std::uniform_int_distribution<int> exponent(-30, 30);
  int e = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 100 == 0) e = exponent(rng);
    v[i] = std::ldexp(v[i], e);
  }
  return v;
}

inline int code_of(const std::vector<uint8_t>& codes, QuantFormat f, size_t i) {
  if (f == QuantFormat::int8) return int8_code(codes[i]);
  return i % 2 == 0 ? int4_lo(codes[i / 2]) : int4_hi(codes[i / 2]);
}

// Codes and scales of n elements, filled with bytes no kernel writes, so a gap shows.
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Quantized(QuantFormat f, size_t n, size_t block)
      : codes(quant_code_bytes(f, n), 0xaa), scales(quant_blocks(n, block), -1.0f) {}
};

inline std::string quant_trace(QuantFormat f, DType dtype, size_t n, size_t block) {
  return std::string(quant_format_name(f)) + " " + dtype_name(dtype) + " n=" + std::to_string(n) +
         " block=" + std::to_string(block);
}

}  // namespace zb
