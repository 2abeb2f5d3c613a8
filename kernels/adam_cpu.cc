// Fused AdamW on the CPU: contiguous chunks per pool thread, inner loops vectorised by GCC.
#include <cassert>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/optimizer.h"
#include "kernels/thread_pool.h"

namespace zb {

namespace {

// GCC will not vectorise a loop that calls sqrtf unless -fno-math-errno is on the command line
// (the libm call may set errno, so a branch to it stays in the loop; neither the pragma nor the
// attribute form of the flag removes it). So each block of kBlock elements runs as: a loop for
// m and v that GCC vectorises, the block's square roots with intrinsics, then a vectorised loop
// for master and the BF16 weights. GCC keeps `root` in registers when the intrinsics have the
// width of its loop vectors: 256 bits at levels 3 and 4 (a 512-bit root over two 256-bit stores
// stalls on store forwarding and ran 3x slower), 128 at the baseline. Square root instructions
// are IEEE exact, so the results equal the scalar sqrtf bit for bit.
constexpr size_t kBlock = 16;

struct SqrtScalar {  // other architectures: the compiler's own choice
  static void block(float* x) {
    for (size_t j = 0; j < kBlock; ++j) x[j] = sqrtf(x[j]);
  }
};

#if defined(__x86_64__)
struct SqrtSse2 {
  __attribute__((always_inline)) static void block(float* x) {
    for (size_t j = 0; j < kBlock; j += 4) _mm_store_ps(x + j, _mm_sqrt_ps(_mm_load_ps(x + j)));
  }
};

struct SqrtAvx {
  __attribute__((target("avx"))) static void block(float* x) {
    for (size_t j = 0; j < kBlock; j += 8)
      _mm256_store_ps(x + j, _mm256_sqrt_ps(_mm256_load_ps(x + j)));
  }
};

#endif

template <class Sqrt, class Grad, class Load>
__attribute__((always_inline)) inline void adam_block(const Grad* __restrict grad, Load load,
                                                      float* __restrict master, float* __restrict m,
                                                      float* __restrict v, Bf16* __restrict weights,
                                                      const AdamConstants& c) {
  alignas(64) float root[kBlock];
  // ivdep: the arrays never overlap (__restrict), which GCC otherwise re-checks every block.
#pragma GCC ivdep
  for (size_t j = 0; j < kBlock; ++j) {
    adam_moments(load(grad[j]), m[j], v[j], c);
    root[j] = v[j];
  }
  Sqrt::block(root);
#pragma GCC ivdep
  for (size_t j = 0; j < kBlock; ++j) {
    master[j] = adam_master(master[j], m[j], root[j], c);
    weights[j] = float_to_bf16(master[j]);
  }
}

template <class Sqrt, class Grad, class Load>
__attribute__((always_inline)) inline void adam_loop(const Grad* grad, Load load, float* master,
                                                     float* m, float* v, Bf16* weights, size_t n,
                                                     const AdamConstants& c) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    adam_block<Sqrt>(grad + i, load, master + i, m + i, v + i, weights + i, c);
  if (i == n) return;
  // The tail goes through the same block code on zero-padded copies: an element's result then
  // never depends on where a shard or thread boundary falls (a scalar loop could contract
  // multiply-adds differently), so any split of a buffer gives the same bits.
  size_t r = n - i;
  Grad tg[kBlock] = {};
  float tmaster[kBlock] = {}, tm[kBlock] = {}, tv[kBlock] = {};
  Bf16 tw[kBlock];
  for (size_t j = 0; j < r; ++j) {
    tg[j] = grad[i + j];
    tmaster[j] = master[i + j];
    tm[j] = m[i + j];
    tv[j] = v[i + j];
  }
  adam_block<Sqrt>(tg, load, tmaster, tm, tv, tw, c);
  for (size_t j = 0; j < r; ++j) {
    master[i + j] = tmaster[j];
    m[i + j] = tm[j];
    v[i + j] = tv[j];
    weights[i + j] = tw[j];
  }
}

inline float load_f32(float g) { return g; }
inline float load_bf16(Bf16 g) { return bf16_to_float(g); }

// One binary runs on any x86-64: GCC's function multiversioning compiles one version per
// micro-architecture level (the build sets no -march) and picks one when the program loads.
// Level 4 (AVX-512 with BW/VL) is 2x faster than plain avx512f here: BF16 packing needs
// 16-bit lanes.
#define ZB_ADAM_CHUNK(target_attr, sqrt_impl)                                                      \
  target_attr void adam_chunk(const float* grad, float* master, float* m, float* v, Bf16* weights, \
                              size_t n, AdamConstants c) {                                         \
    adam_loop<sqrt_impl>(grad, load_f32, master, m, v, weights, n, c);                             \
  }                                                                                                \
  target_attr void adam_chunk(const Bf16* grad, float* master, float* m, float* v, Bf16* weights,  \
                              size_t n, AdamConstants c) {                                         \
    adam_loop<sqrt_impl>(grad, load_bf16, master, m, v, weights, n, c);                            \
  }

#if defined(__x86_64__)
ZB_ADAM_CHUNK(__attribute__((target("arch=x86-64-v4"))), SqrtAvx)
ZB_ADAM_CHUNK(__attribute__((target("arch=x86-64-v3"))), SqrtAvx)
ZB_ADAM_CHUNK(__attribute__((target("default"))), SqrtSse2)
#else
ZB_ADAM_CHUNK(, SqrtScalar)
#endif

}  // namespace

void adam_cpu(const void* grad, DType grad_dtype, float* master, float* m, float* v, Bf16* weights,
              size_t n, const AdamParams& params, int threads) {
  assert(params.step >= 1);
  const AdamConstants c = adam_constants(params);
  // 64 elements: a whole number of cache lines for every array, FP32 or BF16.
  constexpr size_t kGrain = 64;
  constexpr size_t kMinPerThread = 1 << 15;
  parallel_chunks(n, threads, kGrain, kMinPerThread, [&](size_t begin, size_t end) {
    if (grad_dtype == DType::f32) {
      adam_chunk(static_cast<const float*>(grad) + begin, master + begin, m + begin, v + begin,
                 weights + begin, end - begin, c);
    } else {
      adam_chunk(static_cast<const Bf16*>(grad) + begin, master + begin, m + begin, v + begin,
                 weights + begin, end - begin, c);
    }
  });
}

}  // namespace zb
