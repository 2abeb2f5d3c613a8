// Synthetic training data on the GPU: the same per-element functions as the CPU loops.
#include "kernels/synthetic.h"

namespace zb {
namespace {

__global__ void init_kernel(float* master, Bf16* weights, size_t n, uint64_t first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    master[i] = initial_weight(first + i);
    weights[i] = float_to_bf16(master[i]);
  }
}

template <typename G>
__global__ void grad_kernel(const Bf16* weights, G* grad, size_t n, uint64_t first, int rank,
                            int ranks, int64_t step) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float g = synthetic_grad(weights[i], rank, ranks, step, first + i);
    if constexpr (sizeof(G) == 2) grad[i] = float_to_bf16(g);
    else grad[i] = g;
  }
}

unsigned blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return unsigned(b < 4096 ? (b ? b : 1) : 4096);
}

}  // namespace

Status init_weights_cuda(float* master, Bf16* weights, size_t n, uint64_t first,
                         cudaStream_t stream) {
  init_kernel<<<blocks_for(n), 256, 0, stream>>>(master, weights, n, first);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status synthetic_grad_cuda(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                           int rank, int ranks, int64_t step, cudaStream_t stream) {
  if (dtype == DType::bf16)
    grad_kernel<<<blocks_for(n), 256, 0, stream>>>(weights, static_cast<Bf16*>(grad), n, first,
                                                   rank, ranks, step);
  else
    grad_kernel<<<blocks_for(n), 256, 0, stream>>>(weights, static_cast<float*>(grad), n, first,
                                                   rank, ranks, step);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace zb
