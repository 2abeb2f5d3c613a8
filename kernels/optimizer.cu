// Fused AdamW and momentum on the GPU: one grid-stride launch per shard, 16-byte accesses.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/optimizer.h"

namespace zb {

namespace {

// Eight elements per vector step: one 16-byte access for BF16 arrays, two for FP32 ones.
constexpr int kVec = 8;
constexpr int kThreads = 256;

__device__ __forceinline__ void load8(const float* p, float out[kVec]) {
  float4 lo = reinterpret_cast<const float4*>(p)[0];
  float4 hi = reinterpret_cast<const float4*>(p)[1];
  out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
  out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
}

__device__ __forceinline__ void store8(float* p, const float in[kVec]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
}

__device__ __forceinline__ void load8(const Bf16* p, float out[kVec]) {
  uint4 u = *reinterpret_cast<const uint4*>(p);
  uint32_t words[4] = {u.x, u.y, u.z, u.w};
  for (int k = 0; k < 4; ++k) {  // little-endian: the lower half is the earlier element
    out[2 * k] = bits_float(words[k] << 16);
    out[2 * k + 1] = bits_float(words[k] & 0xffff0000u);
  }
}

__device__ __forceinline__ void store8(Bf16* p, const Bf16 in[kVec]) {
  uint32_t words[4];
  for (int k = 0; k < 4; ++k)
    words[k] = uint32_t(in[2 * k].bits) | uint32_t(in[2 * k + 1].bits) << 16;
  *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ __forceinline__ float load1(const float* p) { return *p; }
__device__ __forceinline__ float load1(const Bf16* p) { return bf16_to_float(*p); }

struct AdamOp {
  float* master;
  float* m;
  float* v;
  Bf16* weights;
  AdamConstants c;

  __device__ void vec(size_t i, const float g[kVec]) const {
    float w[kVec], mm[kVec], vv[kVec];
    Bf16 out[kVec];
    load8(master + i, w);
    load8(m + i, mm);
    load8(v + i, vv);
    for (int k = 0; k < kVec; ++k) adam_element(g[k], w[k], mm[k], vv[k], out[k], c);
    store8(master + i, w);
    store8(m + i, mm);
    store8(v + i, vv);
    store8(weights + i, out);
  }
  __device__ void one(size_t i, float g) const {
    adam_element(g, master[i], m[i], v[i], weights[i], c);
  }
};

struct MomentumOp {
  float* master;
  float* m;
  Bf16* weights;
  MomentumConstants c;

  __device__ void vec(size_t i, const float g[kVec]) const {
    float w[kVec], mm[kVec];
    Bf16 out[kVec];
    load8(master + i, w);
    load8(m + i, mm);
    for (int k = 0; k < kVec; ++k) momentum_element(g[k], w[k], mm[k], out[k], c);
    store8(master + i, w);
    store8(m + i, mm);
    store8(weights + i, out);
  }
  __device__ void one(size_t i, float g) const {
    momentum_element(g, master[i], m[i], weights[i], c);
  }
};

// Elements [head, head + vectors * kVec) go 8 at a time; the `head` elements before them and
// the tail after them, fewer than 16 in all, go one at a time, also grid-stride.
template <class Grad, class Op>
__global__ void __launch_bounds__(kThreads)
    update_kernel(const Grad* grad, Op op, size_t n, size_t head, size_t vectors) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t k = first; k < vectors; k += stride) {
    size_t i = head + k * kVec;
    float g[kVec];
    load8(grad + i, g);
    op.vec(i, g);
  }
  const size_t tail_begin = head + vectors * kVec;
  const size_t singles = head + (n - tail_begin);
  for (size_t k = first; k < singles; k += stride) {
    size_t i = k < head ? k : tail_begin + (k - head);
    op.one(i, load1(grad + i));
  }
}

// The smallest shift that puts every array on a 16-byte boundary at once, or -1. Shards of one
// flat buffer share their misalignment, so one shift usually serves all arrays.
int common_shift(const void* const* ptrs, const size_t* elem_sizes, int count) {
  for (int shift = 0; shift < kVec; ++shift) {
    bool aligned = true;
    for (int p = 0; p < count && aligned; ++p)
      aligned = (reinterpret_cast<uintptr_t>(ptrs[p]) + shift * elem_sizes[p]) % 16 == 0;
    if (aligned) return shift;
  }
  return -1;
}

template <class Op>
Status launch(const void* grad, DType grad_dtype, const Op& op, const void* const* state,
              const size_t* state_sizes, int state_count, size_t n, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  const void* ptrs[5] = {grad};
  size_t sizes[5] = {dtype_size(grad_dtype)};
  for (int p = 0; p < state_count; ++p) ptrs[p + 1] = state[p], sizes[p + 1] = state_sizes[p];
  int shift = common_shift(ptrs, sizes, state_count + 1);
  size_t head = shift < 0 ? n : std::min(n, size_t(shift));
  size_t vectors = (n - head) / kVec;
  size_t work = vectors + head + (n - head - vectors * kVec);
  int device = 0, sms = 0;
  ZB_CUDA_CHECK(cudaGetDevice(&device));
  ZB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough resident blocks to keep every SM's memory pipeline full; more only adds tail waves.
  size_t blocks = std::min((work + kThreads - 1) / kThreads, size_t(sms) * 8);
  if (grad_dtype == DType::f32) {
    update_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(static_cast<const float*>(grad), op, n,
                                                             head, vectors);
  } else {
    update_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(static_cast<const Bf16*>(grad), op, n,
                                                             head, vectors);
  }
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace

Status adam_cuda(const void* grad, DType grad_dtype, float* master, float* m, float* v,
                 Bf16* weights, size_t n, const AdamParams& params, cudaStream_t stream) {
  ZB_CHECK(params.step >= 1,
           "adam_cuda: step must be >= 1 (bias correction divides by 1 - beta^step)");
  AdamOp op{master, m, v, weights, adam_constants(params)};
  const void* state[4] = {master, m, v, weights};
  const size_t sizes[4] = {4, 4, 4, 2};
  return launch(grad, grad_dtype, op, state, sizes, 4, n, stream);
}

Status momentum_cuda(const void* grad, DType grad_dtype, float* master, float* m, Bf16* weights,
                     size_t n, const MomentumParams& params, cudaStream_t stream) {
  MomentumOp op{master, m, weights, momentum_constants(params)};
  const void* state[3] = {master, m, weights};
  const size_t sizes[3] = {4, 4, 2};
  return launch(grad, grad_dtype, op, state, sizes, 3, n, stream);
}

}  // namespace zb
