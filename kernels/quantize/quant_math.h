// Per-element quantization math shared by the reference, the CPU and the CUDA kernels, so that
// all three compute the same bits.
#pragma once

#include <cfloat>
#include <cstdint>

#include "harness/core/bf16.h"

namespace zb {

// Each FP32 operation rounded on its own. nvcc fuses a multiply and a following add into one
// FMA unless told not to (the host build has -ffp-contract=off), and one rounding instead of
// two would change bits between the engines.
ZB_HD float qmul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

ZB_HD float qadd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

ZB_HD float qdiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// Round to nearest, ties to even, for |t| <= 2^22: after adding 1.5 * 2^23 no fraction bits
// are left, so the FPU's own rounding does it. Two adds that vectorise on every x86-64, where
// rintf is a library call below SSE4.1.
ZB_HD float round_even(float t) {
  const float k = 12582912.0f;
  return qadd(qadd(t, k), -k);
}

// The bits of |x| as an integer: for finite floats (and BF16s, widened) integers order as the
// magnitudes do, so a block's amax is an integer maximum: it vectorises, and being exactly
// associative it gives the same amax for any split of the work.
ZB_HD uint32_t abs_bits(float x) { return float_bits(x) & 0x7fffffffu; }
ZB_HD uint32_t abs_bits(Bf16 x) { return uint32_t(x.bits & 0x7fffu) << 16; }
ZB_HD float load_value(float x) { return x; }
ZB_HD float load_value(Bf16 x) { return bf16_to_float(x); }
ZB_HD void store_value(float v, float* out) { *out = v; }
ZB_HD void store_value(float v, Bf16* out) { *out = float_to_bf16(v); }

// ---- Symmetric block quantization.
//
// Per block: scale s = fl(amax / qmax), the step one code stands for, stored; the codes come
// from a reciprocal, q = clamp(rne(fl(fl(x * pre) * inv))), inv = fl(qmax / (amax * pre)), a
// multiply per element as DeepSpeed does rather than a division. pre is 2^64 for a block whose
// amax is below 2^-64 and 1 otherwise: qmax / amax overflows FP32 once amax < ~2^-121, and the
// exact scaling keeps inv finite and normal for every finite amax.
//
// Error bound, u = 2^-24. With s normal: s = (amax/qmax)(1+d3), inv*pre = (qmax/amax)(1+d1),
// t = x (qmax/amax)(1+d1)(1+d2), each |d| <= u. So |t| <= qmax (1+u)^2 < qmax + 1/2: the clamp
// never acts and |t - q| <= 1/2. Then x - q s = (x - t s) + (t - q) s, where t s =
// x (1+d1)(1+d2)(1+d3), so |x - t s| <= 3.001 u |x| <= 3.001 u amax <= 3.002 u qmax s, and
// |x - q s| <= s/2 + 3.002 qmax s u. With s subnormal, s = amax/qmax + e, |e| <= 2^-150, and
// the same steps give |x - q s| <= s/2 + 3.002 qmax s u + qmax 2^-149 (s = 0 included, where
// |x| <= amax <= qmax 2^-150). block_code_error_bound states this with 4 for 3.002.
// Dequantizing rounds q s to FP32 (|error| <= u qmax s + 2^-150) and, for BF16 output, to
// BF16 (<= 2^-8 of the magnitude, or 2^-134 among BF16 subnormals): block_error_bound.
struct BlockParams {
  float scale;  // stored with the codes
  float pre;    // 1, or 2^64 below amax 2^-64
  float inv;    // qmax / (amax * pre); 0 for an all-zero block, whose codes are then all 0
};

ZB_HD BlockParams block_params(float amax, int qmax) {
  BlockParams p;
  p.scale = qdiv(amax, float(qmax));
  p.pre = amax < 0x1p-64f ? 0x1p64f : 1.0f;
  p.inv = amax > 0.0f ? qdiv(float(qmax), qmul(amax, p.pre)) : 0.0f;
  return p;
}

ZB_HD int quant_code(float x, const BlockParams& p, int qmax) {
  float t = round_even(qmul(qmul(x, p.pre), p.inv));
  const float q = float(qmax);
  t = t > q ? q : t;
  t = t < -q ? -q : t;
  return int(t);
}

// Saturates at +-FLT_MAX: with amax near FLT_MAX, qmax * fl(amax / qmax) can exceed it by an
// ulp, which is no reason to return infinity for a finite input.
ZB_HD float dequant_value(int code, float scale) {
  const float v = qmul(float(code), scale);
  return v > FLT_MAX ? FLT_MAX : (v < -FLT_MAX ? -FLT_MAX : v);
}

// Codes as stored: INT8 a two's complement byte; INT4 a two's complement nibble, the earlier
// element of each pair in the low nibble.
ZB_HD uint8_t int8_byte(int code) { return uint8_t(code); }
ZB_HD int int8_code(uint8_t b) { return int(int8_t(b)); }
ZB_HD uint8_t int4_pack(int lo, int hi) { return uint8_t((lo & 0xf) | ((hi & 0xf) << 4)); }
ZB_HD int int4_lo(uint8_t b) { return int(int8_t(uint8_t(b << 4))) >> 4; }
ZB_HD int int4_hi(uint8_t b) { return int(int8_t(b)) >> 4; }

// ---- FP8 E4M3 ("fn"): bias 7, no infinities, 0x7f and 0xff are NaN, largest value 448.

// torchao's amax_to_scale: the amax clamped below at 1e-12 in FP32, then 448 / amax in double,
// rounded to FP32.
ZB_HD float fp8_scale(float amax) {
  const float a = amax > 1e-12f ? amax : 1e-12f;
  return float(448.0 / double(a));
}

// Round to nearest even, saturating at +-448 (torchao clamps before its cast, which is the
// same), NaN to NaN. Normal range: the float's bits rounded to 3 mantissa bits. Below 2^-6:
// multiples of 2^-9, and the code is that multiple (code 8 is 2^-6, the smallest normal).
// Written without branches so that the CPU loop vectorises.
ZB_HD uint8_t float_to_e4m3(float v) {
  const uint32_t u = float_bits(v);
  const uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  const bool nan = a > 0x7f800000u;
  a = a < 0x43e00000u ? a : 0x43e00000u;  // 448.0f
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  const uint32_t normal = (((r >> 23) - 120u) << 3) | ((r >> 20) & 7u);
  // Through int: x86 has no unsigned conversions below AVX-512, and GCC's branchy stand-in
  // would stop the loop from vectorising.
  const uint32_t sub = uint32_t(int32_t(round_even(qmul(bits_float(a), 512.0f))));
  const uint32_t code = a < 0x3c800000u ? sub : normal;  // 2^-6
  return uint8_t(sign | (nan ? 0x7fu : code));
}

ZB_HD float e4m3_to_float(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  const float mag = e == 0 ? qmul(float(int32_t(m)), 0x1p-9f) : bits_float(((e + 120u) << 23) | (m << 20));
  return (c & 0x7fu) == 0x7fu ? bits_float(sign | 0x7fc00000u) : bits_float(float_bits(mag) | sign);
}

// torchao: the element in FP32 times the scale, saturated and cast; back, the FP8 value divided
// by the scale. Error bound (fp8_error_bound): with v = fl(x s) and c its code, |v - c| <=
// max(|v| 2^-4, 2^-10) (half a step of 3 mantissa bits, or of the subnormals' 2^-9), so
// |x - c/s| <= u|x| + max(|x|(1+u) 2^-4, 2^-10/s), and the FP32 and BF16 roundings of c/s add
// u and 2^-8 of its magnitude.
ZB_HD uint8_t fp8_code(float x, float scale) { return float_to_e4m3(qmul(x, scale)); }
ZB_HD float fp8_value(uint8_t c, float scale) { return qdiv(e4m3_to_float(c), scale); }

}  // namespace zb
