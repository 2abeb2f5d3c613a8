// The quantization kernels on the GPU: a thread block per quantization block (its amax, then its
// codes), grid-stride loops elsewhere, the per-element math from quant_math.h. Kept plain (an
// element per thread, no vector accesses) so that it can be trusted before it is fast.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/quantize/quant_math.h"
#include "kernels/quantize/quantize.h"

namespace zb {

namespace {

constexpr int kThreads = 256;

// Enough resident blocks to keep every SM's memory pipeline busy, no more than there is work.
Status grid_for(size_t work, unsigned* grid) {
  int device = 0, sms = 0;
  ZB_CUDA_CHECK(cudaGetDevice(&device));
  ZB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  *grid = unsigned(std::max<size_t>(1, std::min(work, size_t(sms) * 8)));
  return Status::ok();
}

// The maximum over the thread block, in every thread. Every thread of the block must call it.
__device__ uint32_t block_max(uint32_t m) {
  __shared__ uint32_t warp_max[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  m = 0;
  for (int w = 0; w < kThreads / 32; ++w) m = max(m, warp_max[w]);
  __syncthreads();  // everyone has read warp_max before the next call writes it
  return m;
}

__device__ int code_at(const uint8_t* codes, bool int4, size_t i) {
  if (!int4) return int8_code(codes[i]);
  return i % 2 == 0 ? int4_lo(codes[i / 2]) : int4_hi(codes[i / 2]);
}

// What a block quantizes: an array's elements, or (the reduction) the FP32 sum of several
// quantized inputs' dequantized elements, added in input order as the reference does.
template <class T>
struct Plain {
  const T* x;
  __device__ float operator()(size_t i) const { return load_value(x[i]); }
};

struct Summed {
  QuantInputs in;
  size_t block;
  bool int4;
  __device__ float operator()(size_t i) const {
    float sum = 0.0f;
    for (int j = 0; j < in.count; ++j)
      sum = qadd(sum, dequant_value(code_at(in.codes + size_t(j) * in.code_stride, int4, i),
                                    in.scales[size_t(j) * in.scale_stride + i / block]));
    return sum;
  }
};

// Each thread block takes quantization blocks b, b + gridDim.x, ...: the amax over the block,
// then the codes, the values read (or summed) again in the second pass.
template <class Source>
__global__ void __launch_bounds__(kThreads)
    quantize_blocks(Source src, size_t n, size_t block, size_t blocks, int qmax, bool int4,
                    uint8_t* codes, float* scales) {
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t begin = b * block, len = (n - begin < block ? n - begin : block);
    uint32_t m = 0;
    for (size_t i = threadIdx.x; i < len; i += kThreads) m = max(m, abs_bits(src(begin + i)));
    const BlockParams p = block_params(bits_float(block_max(m)), qmax);
    if (threadIdx.x == 0) scales[b] = p.scale;
    if (!int4) {
      for (size_t i = threadIdx.x; i < len; i += kThreads)
        codes[begin + i] = int8_byte(quant_code(src(begin + i), p, qmax));
      continue;
    }
    for (size_t k = threadIdx.x; k < (len + 1) / 2; k += kThreads) {
      const size_t i = begin + 2 * k;
      const int lo = quant_code(src(i), p, qmax);
      const int hi = 2 * k + 1 < len ? quant_code(src(i + 1), p, qmax) : 0;
      codes[i / 2] = int4_pack(lo, hi);
    }
  }
}

template <class T>
__global__ void dequantize_kernel(const uint8_t* codes, const float* scales, size_t n, size_t block,
                                  bool int4, T* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_value(dequant_value(code_at(codes, int4, i), scales[i / block]), out + i);
}

template <class T>
__global__ void __launch_bounds__(kThreads) amax_kernel(const T* x, size_t n, unsigned int* amax) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  uint32_t m = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    m = max(m, abs_bits(x[i]));
  m = block_max(m);
  if (threadIdx.x == 0) atomicMax(amax, m);  // integer order is |x|'s order (quant_math.h)
}

template <class T>
__global__ void fp8_quantize_kernel(const T* x, size_t n, const float* amax, uint8_t* codes) {
  const float scale = fp8_scale(*amax);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    codes[i] = fp8_code(load_value(x[i]), scale);
}

template <class T>
__global__ void fp8_dequantize_kernel(const uint8_t* codes, size_t n, const float* amax, T* out) {
  const float scale = fp8_scale(*amax);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_value(fp8_value(codes[i], scale), out + i);
}

template <class Source>
Status launch_quantize(const Source& src, size_t n, QuantFormat f, size_t block, uint8_t* codes,
                       float* scales, cudaStream_t stream) {
  const size_t blocks = quant_blocks(n, block);
  unsigned grid = 0;
  ZB_RETURN_IF_ERROR(grid_for(blocks, &grid));
  quantize_blocks<<<grid, kThreads, 0, stream>>>(src, n, block, blocks, quant_qmax(f),
                                                 f == QuantFormat::int4, codes, scales);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status elementwise_grid(size_t n, unsigned* grid) { return grid_for((n + kThreads - 1) / kThreads, grid); }

}  // namespace

Status block_quantize_cuda(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                           uint8_t* codes, float* scales, cudaStream_t stream) {
  ZB_CHECK(quant_block_ok(f, block), "block_quantize_cuda: not a block size for this format");
  if (n == 0) return Status::ok();
  if (dtype == DType::f32)
    return launch_quantize(Plain<float>{static_cast<const float*>(x)}, n, f, block, codes, scales, stream);
  return launch_quantize(Plain<Bf16>{static_cast<const Bf16*>(x)}, n, f, block, codes, scales, stream);
}

Status block_reduce_cuda(const QuantInputs& in, size_t n, QuantFormat f, size_t block,
                         uint8_t* codes, float* scales, cudaStream_t stream) {
  ZB_CHECK(quant_block_ok(f, block), "block_reduce_cuda: not a block size for this format");
  if (n == 0) return Status::ok();
  return launch_quantize(Summed{in, block, f == QuantFormat::int4}, n, f, block, codes, scales, stream);
}

Status block_dequantize_cuda(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                             size_t block, void* out, DType dtype, cudaStream_t stream) {
  ZB_CHECK(quant_block_ok(f, block), "block_dequantize_cuda: not a block size for this format");
  if (n == 0) return Status::ok();
  unsigned grid = 0;
  ZB_RETURN_IF_ERROR(elementwise_grid(n, &grid));
  const bool int4 = f == QuantFormat::int4;
  if (dtype == DType::f32)
    dequantize_kernel<<<grid, kThreads, 0, stream>>>(codes, scales, n, block, int4, static_cast<float*>(out));
  else
    dequantize_kernel<<<grid, kThreads, 0, stream>>>(codes, scales, n, block, int4, static_cast<Bf16*>(out));
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status fp8_amax_cuda(const void* x, DType dtype, size_t n, float* amax, cudaStream_t stream) {
  ZB_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (n == 0) return Status::ok();
  unsigned grid = 0;
  ZB_RETURN_IF_ERROR(elementwise_grid(n, &grid));
  unsigned int* bits = reinterpret_cast<unsigned int*>(amax);
  if (dtype == DType::f32)
    amax_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(x), n, bits);
  else
    amax_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const Bf16*>(x), n, bits);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status fp8_quantize_cuda(const void* x, DType dtype, size_t n, const float* amax, uint8_t* codes,
                         cudaStream_t stream) {
  if (n == 0) return Status::ok();
  unsigned grid = 0;
  ZB_RETURN_IF_ERROR(elementwise_grid(n, &grid));
  if (dtype == DType::f32)
    fp8_quantize_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(x), n, amax, codes);
  else
    fp8_quantize_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const Bf16*>(x), n, amax, codes);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status fp8_dequantize_cuda(const uint8_t* codes, size_t n, const float* amax, void* out,
                           DType dtype, cudaStream_t stream) {
  if (n == 0) return Status::ok();
  unsigned grid = 0;
  ZB_RETURN_IF_ERROR(elementwise_grid(n, &grid));
  if (dtype == DType::f32)
    fp8_dequantize_kernel<<<grid, kThreads, 0, stream>>>(codes, n, amax, static_cast<float*>(out));
  else
    fp8_dequantize_kernel<<<grid, kThreads, 0, stream>>>(codes, n, amax, static_cast<Bf16*>(out));
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

}  // namespace zb
