// Gradient accumulation on the GPU: the same per-element rules as the CPU loops.
#include "kernels/accumulate.h"
#include "kernels/synthetic.h"

namespace zb {
namespace {

template <typename G>
__global__ void add_kernel(G* dst, const G* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(G) == 2) dst[i] = bf16_add(dst[i], src[i]);
    else dst[i] += src[i];
  }
}

template <typename G>
__global__ void grad_add_kernel(const Bf16* weights, G* grad, size_t n, uint64_t first, int rank,
                                int ranks, int64_t step) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float v = synthetic_grad(weights[i], rank, ranks, step, first + i);
    if constexpr (sizeof(G) == 2) grad[i] = float_to_bf16(bf16_to_float(grad[i]) + v);
    else grad[i] += v;
  }
}

unsigned blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return unsigned(b < 4096 ? (b ? b : 1) : 4096);
}

}  // namespace

Status accumulate_cuda(void* dst, const void* src, DType dtype, size_t n, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  if (dtype == DType::bf16)
    add_kernel<<<blocks_for(n), 256, 0, stream>>>(static_cast<Bf16*>(dst),
                                                  static_cast<const Bf16*>(src), n);
  else
    add_kernel<<<blocks_for(n), 256, 0, stream>>>(static_cast<float*>(dst),
                                                  static_cast<const float*>(src), n);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status synthetic_grad_accumulate_cuda(const Bf16* weights, void* grad, DType dtype, size_t n,
                                      uint64_t first, int rank, int ranks, int64_t step,
                                      cudaStream_t stream) {
  if (n == 0) return Status::ok();
  if (dtype == DType::bf16)
    grad_add_kernel<<<blocks_for(n), 256, 0, stream>>>(weights, static_cast<Bf16*>(grad), n,
                                                       first, rank, ranks, step);
  else
    grad_add_kernel<<<blocks_for(n), 256, 0, stream>>>(weights, static_cast<float*>(grad), n,
                                                       first, rank, ranks, step);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace zb
