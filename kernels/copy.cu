// Device-to-device copy kernel: the GPU memory-bandwidth limit, same launch shape as the updates.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/copy.h"

namespace zb {

namespace {

constexpr int kThreads = 256;

// float4 steps over [head, head + 4 * vectors); the head and the tail, under 8 floats in all,
// one float at a time.
__global__ void __launch_bounds__(kThreads)
    copy_kernel(float* dst, const float* src, size_t n, size_t head, size_t vectors) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* s = reinterpret_cast<const float4*>(src + head);
  float4* d = reinterpret_cast<float4*>(dst + head);
  for (size_t k = first; k < vectors; k += stride) d[k] = s[k];
  const size_t tail_begin = head + 4 * vectors;
  const size_t singles = head + (n - tail_begin);
  for (size_t k = first; k < singles; k += stride) {
    size_t i = k < head ? k : tail_begin + (k - head);
    dst[i] = src[i];
  }
}

}  // namespace

Status copy_cuda(float* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  // One shift must align both pointers; when their misalignments differ, no float4 is
  // possible and every element goes one at a time.
  uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  size_t head = n;
  for (size_t shift = 0; shift < 4; ++shift)
    if ((d + 4 * shift) % 16 == 0 && (s + 4 * shift) % 16 == 0) {
      head = std::min(n, shift);
      break;
    }
  size_t vectors = (n - head) / 4;
  size_t work = vectors + head + (n - head - 4 * vectors);
  int device = 0, sms = 0;
  ZB_CUDA_CHECK(cudaGetDevice(&device));
  ZB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  size_t blocks = std::min((work + kThreads - 1) / kThreads, size_t(sms) * 8);
  copy_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(dst, src, n, head, vectors);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace zb
