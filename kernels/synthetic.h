// Synthetic training data: initial weights and the "backward" of a layer, a gradient that
// depends on the layer's current weights, the rank and the step, so a wrong gather or
// reduce changes the result. Values are multiples of 2^-6 whose sums over ranks stay exact
// in BF16, so every stage can be compared with the reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "harness/core/bf16.h"
#include "harness/core/dtype.h"

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

ZB_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Initial master weight of flat element `index`: k/1024 for k in [-1000, 1000], so it is
// exact in BF16's neighbourhood and the BF16 weights start equal to the master.
ZB_HD float initial_weight(uint64_t index) {
  return bf16_to_float(float_to_bf16(float(int64_t(mix64(index) % 2001) - 1000) / 1024.0f));
}

// One hash serves a group of 8 consecutive elements (a byte each), so the CPU backward
// stays cheap next to the communication it is meant to overlap.
ZB_HD uint64_t grad_group_hash(int rank, int64_t step, uint64_t index) {
  return mix64((index >> 3) * 0x100000001b3ull ^ (uint64_t(step) << 20) ^ uint64_t(rank));
}

// Gradient rank `rank` of `ranks` computes for element `index` at `step` from its current
// BF16 weight: k * 2^-6 with |k| <= 12. Above 16 ranks only every K-th rank contributes to
// an element, so |sum of k| <= 16 * 12 < 256 and every partial sum is exact in BF16.
ZB_HD float synthetic_grad_hashed(Bf16 weight, int rank, int ranks, uint64_t index, uint64_t group_hash) {
  int stride = ranks <= 16 ? 1 : (ranks + 15) / 16;
  if (stride > 1 && (uint64_t(rank) + index) % uint64_t(stride) != 0) return 0.0f;
  int byte = int((group_hash >> (8 * (index & 7))) & 0xff);
  int k = byte % 17 - 8 + int(weight.bits & 7) - 3;
  return float(k) * (1.0f / 64.0f);
}

ZB_HD float synthetic_grad(Bf16 weight, int rank, int ranks, int64_t step, uint64_t index) {
  return synthetic_grad_hashed(weight, rank, ranks, index, grad_group_hash(rank, step, index));
}

// CPU loops over [0, n): element i is flat index first + i.
void init_weights_cpu(float* master, Bf16* weights, size_t n, uint64_t first);
void synthetic_grad_cpu(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                        int rank, int ranks, int64_t step);

#if defined(ZB_HAVE_CUDA)
Status init_weights_cuda(float* master, Bf16* weights, size_t n, uint64_t first,
                         cudaStream_t stream);
Status synthetic_grad_cuda(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                           int rank, int ranks, int64_t step, cudaStream_t stream);
#endif

}  // namespace zb
