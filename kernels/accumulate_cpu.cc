// Gradient accumulation on the CPU.
#include "kernels/accumulate.h"

#include "kernels/synthetic.h"
#include "kernels/thread_pool.h"

namespace zb {

void accumulate_cpu(void* dst, const void* src, DType dtype, size_t n) {
  if (dtype == DType::bf16) {
    Bf16* d = static_cast<Bf16*>(dst);
    const Bf16* s = static_cast<const Bf16*>(src);
    for (size_t i = 0; i < n; ++i) d[i] = bf16_add(d[i], s[i]);
    return;
  }
  float* d = static_cast<float*>(dst);
  const float* s = static_cast<const float*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

void accumulate_cpu_threads(void* dst, const void* src, DType dtype, size_t n, int threads) {
  const size_t size = dtype_size(dtype);
  // 64-element boundaries keep threads off each other's cache lines; below 64K elements per
  // thread, waking one costs more than it saves.
  parallel_chunks(n, threads, 64, size_t(1) << 16, [&](size_t begin, size_t end) {
    accumulate_cpu(static_cast<char*>(dst) + begin * size, static_cast<const char*>(src) + begin * size, dtype,
                   end - begin);
  });
}

template <typename G>
static void add(G* g, size_t i, float v) {
  if constexpr (sizeof(G) == 2) g[i] = float_to_bf16(bf16_to_float(g[i]) + v);
  else g[i] += v;
}

// Above 16 ranks a rank contributes to every stride-th element only (synthetic.h) and adds
// exactly zero to the rest, so only those are visited. Otherwise the gradient is written a
// block at a time by synthetic_grad_cpu's fast loop into a buffer on the stack and added from
// there, so accumulating costs little more than writing.
template <typename G>
static void accumulate_loop(const Bf16* w, G* g, DType dtype, size_t n, uint64_t first, int rank,
                            int ranks, int64_t step) {
  const uint64_t stride = ranks <= 16 ? 1 : uint64_t(ranks + 15) / 16;
  if (stride > 1) {
    for (size_t i = (stride - (uint64_t(rank) + first) % stride) % stride; i < n; i += stride)
      add(g, i, synthetic_grad(w[i], rank, ranks, step, first + i));
    return;
  }
  constexpr size_t kBlock = 1024;
  G block[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t len = n - i < kBlock ? n - i : kBlock;
    synthetic_grad_cpu(w + i, block, dtype, len, first + i, rank, ranks, step);
    if constexpr (sizeof(G) == 2) {
      for (size_t j = 0; j < len; ++j) g[i + j] = bf16_add(g[i + j], block[j]);
    } else {
      for (size_t j = 0; j < len; ++j) g[i + j] += block[j];
    }
  }
}

void synthetic_grad_accumulate_cpu(const Bf16* weights, void* grad, DType dtype, size_t n,
                                   uint64_t first, int rank, int ranks, int64_t step) {
  if (dtype == DType::bf16)
    accumulate_loop(weights, static_cast<Bf16*>(grad), dtype, n, first, rank, ranks, step);
  else
    accumulate_loop(weights, static_cast<float*>(grad), dtype, n, first, rank, ranks, step);
}

}  // namespace zb
