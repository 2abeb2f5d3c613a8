// Fused momentum update on the CPU: contiguous chunks per pool thread, vectorised inner loop.
#include "kernels/optimizer.h"
#include "kernels/thread_pool.h"

namespace zb {

namespace {

constexpr size_t kBlock = 16;

template <class Grad, class Load>
__attribute__((always_inline)) inline void momentum_block(const Grad* __restrict grad, Load load,
                                                          float* __restrict master,
                                                          float* __restrict m,
                                                          Bf16* __restrict weights,
                                                          const MomentumConstants& c) {
#pragma GCC ivdep
  for (size_t j = 0; j < kBlock; ++j)
    momentum_element(load(grad[j]), master[j], m[j], weights[j], c);
}

// Whole blocks, then the tail through the same block code on zero-padded copies, so that an
// element's bits never depend on where a shard or thread boundary falls (as in adam_cpu.cc).
template <class Grad, class Load>
__attribute__((always_inline)) inline void momentum_loop(const Grad* grad, Load load, float* master,
                                                         float* m, Bf16* weights, size_t n,
                                                         const MomentumConstants& c) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    momentum_block(grad + i, load, master + i, m + i, weights + i, c);
  if (i == n) return;
  size_t r = n - i;
  Grad tg[kBlock] = {};
  float tmaster[kBlock] = {}, tm[kBlock] = {};
  Bf16 tw[kBlock];
  for (size_t j = 0; j < r; ++j) {
    tg[j] = grad[i + j];
    tmaster[j] = master[i + j];
    tm[j] = m[i + j];
  }
  momentum_block(tg, load, tmaster, tm, tw, c);
  for (size_t j = 0; j < r; ++j) {
    master[i + j] = tmaster[j];
    m[i + j] = tm[j];
    weights[i + j] = tw[j];
  }
}

inline float load_f32(float g) { return g; }
inline float load_bf16(Bf16 g) { return bf16_to_float(g); }

// One binary for any x86-64: a version per micro-architecture level, chosen at load time (the
// build sets no -march). Level 4 rather than plain avx512f: BF16 packing needs 16-bit lanes.
#if defined(__x86_64__)
#define ZB_LEVELS __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZB_LEVELS
#endif

ZB_LEVELS void momentum_chunk_f32(const float* grad, float* master, float* m, Bf16* weights,
                                  size_t n, MomentumConstants c) {
  momentum_loop(grad, load_f32, master, m, weights, n, c);
}

ZB_LEVELS void momentum_chunk_bf16(const Bf16* grad, float* master, float* m, Bf16* weights,
                                   size_t n, MomentumConstants c) {
  momentum_loop(grad, load_bf16, master, m, weights, n, c);
}

#undef ZB_LEVELS

}  // namespace

void momentum_cpu(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                  size_t n, const MomentumParams& params, int threads) {
  const MomentumConstants c = momentum_constants(params);
  constexpr size_t kGrain = 64;  // whole cache lines per thread, as in adam_cpu
  constexpr size_t kMinPerThread = 1 << 15;
  parallel_chunks(n, threads, kGrain, kMinPerThread, [&](size_t begin, size_t end) {
    if (grad_dtype == DType::f32) {
      momentum_chunk_f32(static_cast<const float*>(grad) + begin, master + begin, m + begin,
                         weights + begin, end - begin, c);
    } else {
      momentum_chunk_bf16(static_cast<const Bf16*>(grad) + begin, master + begin, m + begin,
                          weights + begin, end - begin, c);
    }
  });
}

}  // namespace zb
