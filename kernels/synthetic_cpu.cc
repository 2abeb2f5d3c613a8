// Synthetic training data on the CPU.
#include "kernels/synthetic.h"

#include <algorithm>

namespace zb {

void init_weights_cpu(float* master, Bf16* weights, size_t n, uint64_t first) {
  for (size_t i = 0; i < n; ++i) {
    master[i] = initial_weight(first + i);
    weights[i] = float_to_bf16(master[i]);
  }
}

template <typename G>
static void store(G* g, size_t i, float v) {
  if constexpr (sizeof(G) == 2) g[i] = float_to_bf16(v);
  else g[i] = v;
}

// Element by element up to a group boundary, then whole groups of 8 with one hash each:
// the loop the compiler can unroll, so the CPU backward stays cheap.
template <typename G>
static void grad_loop(const Bf16* weights, G* g, size_t n, uint64_t first, int rank, int ranks,
                      int64_t step) {
  size_t i = 0;
  for (; i < n && ((first + i) & 7) != 0; ++i)
    store(g, i, synthetic_grad(weights[i], rank, ranks, step, first + i));
  if (ranks <= 16) {
    // Hashes first (a short loop of its own), then a branch-free loop over the elements.
    constexpr size_t kBlock = 512;
    uint64_t hashes[kBlock / 8];
    while (i + 8 <= n) {
      size_t len = std::min(kBlock, (n - i) / 8 * 8);
      for (size_t q = 0; q < len / 8; ++q) hashes[q] = grad_group_hash(rank, step, first + i + 8 * q);
      const uint8_t* bytes = reinterpret_cast<const uint8_t*>(hashes);  // little-endian: byte j of hash
      for (size_t j = 0; j < len; ++j) {
        int k = int(bytes[j]) % 17 - 8 + int(weights[i + j].bits & 7) - 3;
        float v = float(k) * (1.0f / 64.0f);
        if constexpr (sizeof(G) == 2) g[i + j].bits = uint16_t(float_bits(v) >> 16);  // exact in BF16
        else g[i + j] = v;
      }
      i += len;
    }
  }
  if (ranks > 16) {
    // Only every stride-th element has a contribution from this rank: zeros, then those.
    const uint64_t stride = uint64_t(ranks + 15) / 16;
    for (size_t j = i; j < n; ++j) store(g, j, 0.0f);
    i += (stride - (uint64_t(rank) + first + i) % stride) % stride;
    for (; i < n; i += stride) store(g, i, synthetic_grad(weights[i], rank, ranks, step, first + i));
    return;
  }
  for (; i < n; ++i) store(g, i, synthetic_grad(weights[i], rank, ranks, step, first + i));
}

void synthetic_grad_cpu(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                        int rank, int ranks, int64_t step) {
  if (dtype == DType::bf16)
    grad_loop(weights, static_cast<Bf16*>(grad), n, first, rank, ranks, step);
  else
    grad_loop(weights, static_cast<float*>(grad), n, first, rank, ranks, step);
}

}  // namespace zb
