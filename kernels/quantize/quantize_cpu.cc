// The quantization kernels on the CPU: whole blocks per pool thread, each pass a plain loop that
// GCC vectorises, the per-element math from quant_math.h.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <vector>

#include "kernels/quantize/quant_math.h"
#include "kernels/quantize/quantize.h"
#include "kernels/thread_pool.h"

namespace zb {

namespace {

// Below this many elements per thread, waking one costs more than it saves.
constexpr size_t kMinPerThread = size_t(1) << 16;

// Work split by whole blocks, so every block is computed by one thread exactly as the
// reference computes it.
template <class Body>
void for_blocks(size_t n, size_t block, int threads, Body&& body) {
  parallel_chunks(quant_blocks(n, block), threads, 1, std::max<size_t>(1, kMinPerThread / block),
                  [&](size_t b0, size_t b1) {
                    for (size_t b = b0; b < b1; ++b) body(b, b * block, std::min(n, (b + 1) * block) - b * block);
                  });
}

template <class T>
uint32_t amax_bits(const T* __restrict x, size_t len) {
  uint32_t m = 0;
  for (size_t i = 0; i < len; ++i) {
    const uint32_t a = abs_bits(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

// One block of `len` values: the amax pass, then the codes.
template <class T>
void quantize_block(const T* __restrict x, size_t len, QuantFormat f, uint8_t* __restrict codes,
                    float* scale) {
  const int qmax = quant_qmax(f);
  const BlockParams p = block_params(bits_float(amax_bits(x, len)), qmax);
  *scale = p.scale;
  if (f == QuantFormat::int8) {
    for (size_t i = 0; i < len; ++i) codes[i] = int8_byte(quant_code(load_value(x[i]), p, qmax));
    return;
  }
  const size_t pairs = len / 2;
  for (size_t k = 0; k < pairs; ++k)
    codes[k] = int4_pack(quant_code(load_value(x[2 * k]), p, qmax),
                         quant_code(load_value(x[2 * k + 1]), p, qmax));
  if (len % 2) codes[pairs] = int4_pack(quant_code(load_value(x[len - 1]), p, qmax), 0);
}

// dequant(code) for `len` codes of one block, handed to `out(i, value)`.
template <class Out>
void dequantize_block(const uint8_t* __restrict codes, size_t len, QuantFormat f, float scale, Out&& out) {
  if (f == QuantFormat::int8) {
    for (size_t i = 0; i < len; ++i) out(i, dequant_value(int8_code(codes[i]), scale));
    return;
  }
  const size_t pairs = len / 2;
  for (size_t k = 0; k < pairs; ++k) {
    out(2 * k, dequant_value(int4_lo(codes[k]), scale));
    out(2 * k + 1, dequant_value(int4_hi(codes[k]), scale));
  }
  if (len % 2) out(len - 1, dequant_value(int4_lo(codes[pairs]), scale));
}

template <class T>
void dequantize_typed(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                      size_t block, T* out, int threads) {
  for_blocks(n, block, threads, [&](size_t b, size_t begin, size_t len) {
    T* __restrict o = out + begin;
    dequantize_block(codes + quant_code_bytes(f, begin), len, f, scales[b],
                     [o](size_t i, float v) { store_value(v, o + i); });
  });
}

template <class T>
void fp8_quantize_typed(const T* x, size_t n, float scale, uint8_t* codes, int threads) {
  // The scale by value: through the lambda's reference, a byte store could alias it, and
  // GCC would reload it every element rather than vectorise.
  parallel_chunks(n, threads, 64, kMinPerThread, [=](size_t begin, size_t end) {
    const T* __restrict in = x + begin;
    uint8_t* __restrict out = codes + begin;
    for (size_t i = 0; i < end - begin; ++i) out[i] = fp8_code(load_value(in[i]), scale);
  });
}

template <class T>
void fp8_dequantize_typed(const uint8_t* codes, size_t n, float scale, T* out, int threads) {
  parallel_chunks(n, threads, 64, kMinPerThread, [=](size_t begin, size_t end) {
    const uint8_t* __restrict in = codes + begin;
    T* __restrict o = out + begin;
    for (size_t i = 0; i < end - begin; ++i) store_value(fp8_value(in[i], scale), o + i);
  });
}

}  // namespace

void block_quantize_cpu(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                        uint8_t* codes, float* scales, int threads) {
  assert(quant_block_ok(f, block));
  for_blocks(n, block, threads, [&](size_t b, size_t begin, size_t len) {
    uint8_t* out = codes + quant_code_bytes(f, begin);
    if (dtype == DType::f32) quantize_block(static_cast<const float*>(x) + begin, len, f, out, &scales[b]);
    else quantize_block(static_cast<const Bf16*>(x) + begin, len, f, out, &scales[b]);
  });
}

void block_dequantize_cpu(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                          size_t block, void* out, DType dtype, int threads) {
  assert(quant_block_ok(f, block));
  if (dtype == DType::f32) dequantize_typed(codes, scales, n, f, block, static_cast<float*>(out), threads);
  else dequantize_typed(codes, scales, n, f, block, static_cast<Bf16*>(out), threads);
}

void block_reduce_cpu(const QuantInputs& in, size_t n, QuantFormat f, size_t block, uint8_t* codes,
                      float* scales, int threads) {
  assert(quant_block_ok(f, block));
  parallel_chunks(quant_blocks(n, block), threads, 1, std::max<size_t>(1, kMinPerThread / block),
                  [&](size_t b0, size_t b1) {
    std::vector<float> sums(std::min(n, block));  // one block's sums, per task
    for (size_t b = b0; b < b1; ++b) {
      const size_t begin = b * block, len = std::min(n, begin + block) - begin;
      float* __restrict s = sums.data();
      std::fill(s, s + len, 0.0f);
      // Input by input: each element still adds its inputs in order 0, 1, ..., as the
      // reference does, and each pass is one vectorised loop.
      for (int j = 0; j < in.count; ++j) {
        const uint8_t* c = in.codes + size_t(j) * in.code_stride + quant_code_bytes(f, begin);
        dequantize_block(c, len, f, in.scales[size_t(j) * in.scale_stride + b],
                         [s](size_t i, float v) { s[i] = qadd(s[i], v); });
      }
      quantize_block(s, len, f, codes + quant_code_bytes(f, begin), &scales[b]);
    }
  });
}

float fp8_amax_cpu(const void* x, DType dtype, size_t n, int threads) {
  std::atomic<uint32_t> amax{0};
  parallel_chunks(n, threads, 64, kMinPerThread, [&](size_t begin, size_t end) {
    const uint32_t m = dtype == DType::f32 ? amax_bits(static_cast<const float*>(x) + begin, end - begin)
                                           : amax_bits(static_cast<const Bf16*>(x) + begin, end - begin);
    uint32_t seen = amax.load();
    while (m > seen && !amax.compare_exchange_weak(seen, m)) {
    }
  });
  return bits_float(amax.load());
}

void fp8_quantize_cpu(const void* x, DType dtype, size_t n, float amax, uint8_t* codes, int threads) {
  const float scale = fp8_scale(amax);
  if (dtype == DType::f32) fp8_quantize_typed(static_cast<const float*>(x), n, scale, codes, threads);
  else fp8_quantize_typed(static_cast<const Bf16*>(x), n, scale, codes, threads);
}

void fp8_dequantize_cpu(const uint8_t* codes, size_t n, float amax, void* out, DType dtype,
                        int threads) {
  const float scale = fp8_scale(amax);
  if (dtype == DType::f32) fp8_dequantize_typed(codes, n, scale, static_cast<float*>(out), threads);
  else fp8_dequantize_typed(codes, n, scale, static_cast<Bf16*>(out), threads);
}

}  // namespace zb
