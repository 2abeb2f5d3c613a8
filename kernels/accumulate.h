// Gradient accumulation over micro-batches: a reduced block added into a gradient shard, and a
// layer's synthetic gradient added into an accumulation buffer (what Megatron's fused wgrad
// GEMM does to main_grad). Each element is one add in FP32 rounded once, as a BF16 reduction
// step is, so sums of the synthetic values stay exact (kernels/synthetic.h).
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

// dst[i] += src[i] for n elements of `dtype` (bf16 or f32).
void accumulate_cpu(void* dst, const void* src, DType dtype, size_t n);
// The same on `threads` threads of the kernel pool (0: all), each a contiguous range: the host
// side of gradient offload, where a copied block is added into the host shard.
void accumulate_cpu_threads(void* dst, const void* src, DType dtype, size_t n, int threads);
// grad[i] += synthetic_grad(weights[i], rank, ranks, step, first + i).
void synthetic_grad_accumulate_cpu(const Bf16* weights, void* grad, DType dtype, size_t n,
                                   uint64_t first, int rank, int ranks, int64_t step);

#if defined(ZB_HAVE_CUDA)
Status accumulate_cuda(void* dst, const void* src, DType dtype, size_t n, cudaStream_t stream);
Status synthetic_grad_accumulate_cuda(const Bf16* weights, void* grad, DType dtype, size_t n,
                                      uint64_t first, int rank, int ranks, int64_t step,
                                      cudaStream_t stream);
#endif

}  // namespace zb
