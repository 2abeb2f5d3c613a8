// Bandwidth probes on the GPU: grid-stride kernels, float4 where every array is 16-byte aligned.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/bandwidth.h"

namespace zb {

namespace {

constexpr int kThreads = 256;
constexpr float kScale = 0.5f;

struct Arrays {
  float* a[4];
};

// One element (or one float4 lane) of a pattern; V is float or float4.
template <typename V>
__device__ __forceinline__ V axpy(float s, V x, V y);
template <>
__device__ __forceinline__ float axpy(float s, float x, float y) { return s * x + y; }
template <>
__device__ __forceinline__ float4 axpy(float s, float4 x, float4 y) {
  return make_float4(s * x.x + y.x, s * x.y + y.y, s * x.z + y.z, s * x.w + y.w);
}
__device__ __forceinline__ float sq(float x) { return x * x; }
__device__ __forceinline__ float4 sq(float4 x) { return make_float4(x.x * x.x, x.y * x.y, x.z * x.z, x.w * x.w); }

template <typename V>
__device__ __forceinline__ void element(Pattern p, const Arrays& arr, size_t i) {
  V** a = reinterpret_cast<V**>(const_cast<float**>(arr.a));
  switch (p) {
    case Pattern::copy_stream:
    case Pattern::copy_plain: a[1][i] = a[0][i]; break;
    case Pattern::triad: a[2][i] = axpy(kScale, a[1][i], a[0][i]); break;
    case Pattern::rmw: {
      V g = a[0][i];
      a[1][i] = axpy(kScale, a[1][i], g);
      a[2][i] = axpy(kScale, a[2][i], g);
      a[3][i] = axpy(kScale, a[3][i], sq(g));
      break;
    }
  }
}

template <typename V>
__global__ void __launch_bounds__(kThreads) pattern_kernel(Pattern p, Arrays arr, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    element<V>(p, arr, i);
}

}  // namespace

Status bandwidth_cuda(Pattern p, float* const* arrays, size_t n, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  Arrays arr{};
  bool aligned = n % 4 == 0;
  for (int k = 0; k < pattern_arrays(p); ++k) {
    arr.a[k] = arrays[k];
    aligned = aligned && reinterpret_cast<uintptr_t>(arrays[k]) % 16 == 0;
  }
  size_t work = aligned ? n / 4 : n;
  int device = 0, sms = 0;
  ZB_CUDA_CHECK(cudaGetDevice(&device));
  ZB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  unsigned blocks = unsigned(std::min((work + kThreads - 1) / kThreads, size_t(sms) * 8));
  if (aligned) pattern_kernel<float4><<<blocks, kThreads, 0, stream>>>(p, arr, work);
  else pattern_kernel<float><<<blocks, kThreads, 0, stream>>>(p, arr, work);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace zb
