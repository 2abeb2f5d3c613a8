// BF16 <-> FP32 conversion, round-to-nearest-even, shared by host and device code.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZB_HD __host__ __device__ __forceinline__
#else
#define ZB_HD inline
#endif

namespace zb {

// Raw BF16 storage: the upper 16 bits of an IEEE-754 binary32.
struct Bf16 {
  uint16_t bits;
};
static_assert(sizeof(Bf16) == 2);

ZB_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ZB_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

ZB_HD float bf16_to_float(Bf16 h) { return bits_float(uint32_t(h.bits) << 16); }

// Round to nearest, ties to even. NaN stays NaN (quiet bit forced, so rounding the
// payload can never turn it into infinity); overflow rounds to infinity as IEEE says.
ZB_HD Bf16 float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return Bf16{uint16_t((u >> 16) | 0x0040u)};
  }
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return Bf16{uint16_t(u >> 16)};
}

// One reduction step as the MPI BF16 sum does it: add in FP32, round once.
ZB_HD Bf16 bf16_add(Bf16 a, Bf16 b) { return float_to_bf16(bf16_to_float(a) + bf16_to_float(b)); }

}  // namespace zb
