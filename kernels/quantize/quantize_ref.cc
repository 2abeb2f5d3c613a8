// Plain references for the quantization kernels, one element at a time, and the error bounds
// that quant_math.h proves.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/quantize/quant_math.h"
#include "kernels/quantize/quantize.h"

namespace zb {

namespace {

constexpr double kU = 0x1p-24;

float load(const void* x, DType dtype, size_t i) {
  if (dtype == DType::f32) return static_cast<const float*>(x)[i];
  return bf16_to_float(static_cast<const Bf16*>(x)[i]);
}

void store(void* out, DType dtype, size_t i, float v) {
  if (dtype == DType::f32) static_cast<float*>(out)[i] = v;
  else static_cast<Bf16*>(out)[i] = float_to_bf16(v);
}

int get_code(const uint8_t* codes, QuantFormat f, size_t i) {
  if (f == QuantFormat::int8) return int8_code(codes[i]);
  return i % 2 == 0 ? int4_lo(codes[i / 2]) : int4_hi(codes[i / 2]);
}

// Element i's code. INT4: the even element writes its byte whole (high nibble 0), the odd one
// after it fills in the high nibble; blocks are even, so both lie in one block.
void put_code(uint8_t* codes, QuantFormat f, size_t i, int code) {
  if (f == QuantFormat::int8) codes[i] = int8_byte(code);
  else if (i % 2 == 0) codes[i / 2] = int4_pack(code, 0);
  else codes[i / 2] = uint8_t(codes[i / 2] | int4_pack(0, code));
}

// Quantizes values[begin, end) as one block: the float amax, independent of the kernels'
// integer one.
void quantize_block(const std::vector<float>& values, size_t begin, size_t end, QuantFormat f,
                    uint8_t* codes, float* scale) {
  const int qmax = quant_qmax(f);
  float amax = 0;
  for (size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(values[i]));
  const BlockParams p = block_params(amax, qmax);
  *scale = p.scale;
  for (size_t i = begin; i < end; ++i) put_code(codes, f, i, quant_code(values[i], p, qmax));
}

}  // namespace

double block_code_error_bound(QuantFormat f, float scale) {
  const double qmax = quant_qmax(f);
  return double(scale) * (0.5 + 4 * qmax * kU) + qmax * 0x1p-149;
}

double block_error_bound(QuantFormat f, float scale, DType out) {
  const double most = quant_qmax(f) * double(scale) * (1 + 2 * kU) + 0x1p-149;  // |fl(q s)|
  double bound = block_code_error_bound(f, scale) + most * kU + 0x1p-150;
  if (out == DType::bf16) bound += most * 0x1p-8 + 0x1p-134;
  return bound;
}

double fp8_error_bound(float x, float scale, DType out) {
  const double ax = std::fabs(double(x)), s = scale;
  const double cast = std::max(ax * (1 + kU) * 0x1p-4, 0x1p-10 / s);
  const double value = ax * (1 + kU) + cast;  // |c / s|
  double bound = ax * kU + cast + value * kU + 0x1p-150;
  if (out == DType::bf16) bound += value * (1 + kU) * 0x1p-8 + 0x1p-134;
  return bound;
}

void block_quantize_reference(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                              uint8_t* codes, float* scales) {
  assert(quant_block_ok(f, block));
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = load(x, dtype, i);
  for (size_t b = 0; b < quant_blocks(n, block); ++b)
    quantize_block(values, b * block, std::min(n, (b + 1) * block), f, codes, &scales[b]);
}

void block_dequantize_reference(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                                size_t block, void* out, DType dtype) {
  assert(quant_block_ok(f, block));
  for (size_t i = 0; i < n; ++i) store(out, dtype, i, dequant_value(get_code(codes, f, i), scales[i / block]));
}

void block_reduce_reference(const QuantInputs& in, size_t n, QuantFormat f, size_t block,
                            uint8_t* codes, float* scales) {
  assert(quant_block_ok(f, block));
  std::vector<float> sums(n);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < in.count; ++j) {
      const uint8_t* c = in.codes + size_t(j) * in.code_stride;
      const float* s = in.scales + size_t(j) * in.scale_stride;
      sum = qadd(sum, dequant_value(get_code(c, f, i), s[i / block]));
    }
    sums[i] = sum;
  }
  for (size_t b = 0; b < quant_blocks(n, block); ++b)
    quantize_block(sums, b * block, std::min(n, (b + 1) * block), f, codes, &scales[b]);
}

float fp8_amax_reference(const void* x, DType dtype, size_t n) {
  float amax = 0;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(load(x, dtype, i)));
  return amax;
}

void fp8_quantize_reference(const void* x, DType dtype, size_t n, float amax, uint8_t* codes) {
  const float scale = fp8_scale(amax);
  for (size_t i = 0; i < n; ++i) codes[i] = fp8_code(load(x, dtype, i), scale);
}

void fp8_dequantize_reference(const uint8_t* codes, size_t n, float amax, void* out, DType dtype) {
  const float scale = fp8_scale(amax);
  for (size_t i = 0; i < n; ++i) store(out, dtype, i, fp8_value(codes[i], scale));
}

}  // namespace zb
