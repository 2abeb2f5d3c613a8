// Quantization for communication: block INT8/INT4 as ZeRO++ sends weights and gradients, and
// per-tensor FP8 E4M3 as torchtitan gathers weights; each a reference, a CPU kernel and CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/dtype.h"

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

// int8 and int4: symmetric block quantization, one FP32 scale per block, as ZeRO++ does both
// (DeepSpeed passes quantizer_module.Symmetric for qwZ and for qgZ). fp8: E4M3 ("fn": no
// infinities, largest value 448) with one FP32 scale per tensor, torchao's float8 cast.
enum class QuantFormat { int8, int4, fp8 };

constexpr const char* quant_format_name(QuantFormat f) {
  return f == QuantFormat::int8 ? "int8" : f == QuantFormat::int4 ? "int4" : "fp8";
}
inline std::vector<std::pair<std::string, QuantFormat>> quant_format_choices() {
  return {{"int8", QuantFormat::int8}, {"int4", QuantFormat::int4}, {"fp8", QuantFormat::fp8}};
}

// Default block sizes, as DeepSpeed's ZeRO++ ends up with them:
// - qwZ (weights, INT8): CUDAQuantizer in deepspeed/runtime/zero/partition_parameters.py aims
//   at groups below target_group_size = 8000 elements ("the optimal size is 4k"), then picks
//   the group count so that 8 x groups divides the shard: for any shard of 2^k >= 8192
//   elements that makes 4096 elements per group.
// - qgZ (gradients, INT4): all_to_all_quant_reduce in deepspeed/runtime/comm/
//   coalesced_collectives.py quantizes a gradient of shape [rows, cols] in max(rows, cols)
//   groups, so a group holds min(rows, cols) elements: a transformer's hidden size, 4096 for a
//   Llama 7B or 8B. A flat buffer has no rows, so that hidden size is the default.
constexpr size_t kWeightQuantBlock = 4096;
constexpr size_t kGradQuantBlock = 4096;

// The codes span [-qmax, qmax], qmax = 2^(bits-1) - 1, with scale = amax / qmax, so the
// largest element maps to qmax exactly and every element lies within half a step of its
// code. DeepSpeed instead scales by 2^bits / (2 amax) and clamps to [-2^(bits-1), 2^(bits-1)-1],
// which cuts the largest positive element by a whole step; we keep the half-step bound.
constexpr int quant_qmax(QuantFormat f) { return f == QuantFormat::int4 ? 7 : 127; }
// Bytes of codes for n elements: INT4 holds element 2k in the low nibble of byte k and 2k+1
// in the high nibble (an odd n leaves the last high nibble 0); INT8 and FP8 a byte each.
constexpr size_t quant_code_bytes(QuantFormat f, size_t n) {
  return f == QuantFormat::int4 ? (n + 1) / 2 : n;
}
constexpr size_t quant_blocks(size_t n, size_t block) { return (n + block - 1) / block; }
// Block sizes the block kernels accept: at least 1, and even for INT4 so that every block
// starts on a whole byte and no two threads write one byte.
constexpr bool quant_block_ok(QuantFormat f, size_t block) {
  return f != QuantFormat::fp8 && block >= 1 && (f != QuantFormat::int4 || block % 2 == 0);
}

// Bytes each kernel moves per element, the numerator of its GB/s: every array read or written
// once (a block's second pass reads what its first just read, from cache), scales shared out
// over their block. fp8 reads its input twice: the tensor-wide amax must be known before any
// element is cast, and a tensor worth timing does not fit in cache.
constexpr double quantize_bytes_per_elem(QuantFormat f, DType x, size_t block) {
  return f == QuantFormat::fp8 ? 2.0 * double(dtype_size(x)) + 1.0
                               : double(dtype_size(x)) + double(quant_code_bytes(f, 2)) / 2.0 +
                                     4.0 / double(block);
}
constexpr double dequantize_bytes_per_elem(QuantFormat f, DType out, size_t block) {
  return f == QuantFormat::fp8 ? 1.0 + double(dtype_size(out))
                               : double(quant_code_bytes(f, 2)) / 2.0 + 4.0 / double(block) +
                                     double(dtype_size(out));
}
// `inputs` quantized buffers in, one out.
constexpr double reduce_bytes_per_elem(QuantFormat f, int inputs, size_t block) {
  return double(inputs + 1) * (double(quant_code_bytes(f, 2)) / 2.0 + 4.0 / double(block));
}

// What one element can lose, bounds for tests and for checking a quantized run (each proved in
// quant_math.h): |x - q * scale| for a block's code q and scale (exact arithmetic), and
// |x - dequantized| once q * scale is rounded to FP32 and then to `out`.
double block_code_error_bound(QuantFormat f, float scale);
double block_error_bound(QuantFormat f, float scale, DType out);
// |x - dequantized| for FP8 with the tensor's `scale` (see fp8_scale), x within 448 / scale.
double fp8_error_bound(float x, float scale, DType out);

// ---- Block quantization (int8, int4). Block b is elements [b * block, min(n, (b + 1) * block)).
// `x` holds n elements of `dtype` (finite); `codes` receives quant_code_bytes(f, n) bytes and
// `scales` quant_blocks(n, block) floats. Preconditions: quant_block_ok(f, block). The CPU
// kernels use up to `threads` pool threads (0: every hardware thread), whole blocks each, and
// give the reference's bits for any thread count.
void block_quantize_reference(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                              uint8_t* codes, float* scales);
void block_quantize_cpu(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                        uint8_t* codes, float* scales, int threads);
// code * scale, rounded to FP32 (saturating at +-FLT_MAX), then to `dtype`.
void block_dequantize_reference(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                                size_t block, void* out, DType dtype);
void block_dequantize_cpu(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                          size_t block, void* out, DType dtype, int threads);

// qgZ's reduction step: `count` quantized buffers of the same n, format and block size, input
// j's codes at codes + j * code_stride (bytes) and its scales at scales + j * scale_stride
// (floats), as one receive buffer of an all-to-all holds them.
struct QuantInputs {
  const uint8_t* codes;
  size_t code_stride;
  const float* scales;
  size_t scale_stride;
  int count;
};
// Each element dequantized from every input, summed in FP32 in input order (starting from
// +0), and the sums requantized in blocks of the same size.
void block_reduce_reference(const QuantInputs& in, size_t n, QuantFormat f, size_t block,
                            uint8_t* codes, float* scales);
void block_reduce_cpu(const QuantInputs& in, size_t n, QuantFormat f, size_t block, uint8_t* codes,
                      float* scales, int threads);

// ---- FP8 E4M3, one scale per tensor, as torchao's float8 all-gather: amax = max |x| over the
// tensor (its shards' amaxes combined by a maximum across ranks), scale = 448 / max(amax, 1e-12)
// computed in double as torchao does, code = the cast of x * scale clamped to +-448, rounded to
// nearest even; back: code / scale, rounded to FP32 and then to `dtype`. Every function takes
// the amax, so sender and receiver derive the same scale (fp8_scale in quant_math.h).
float fp8_amax_reference(const void* x, DType dtype, size_t n);
float fp8_amax_cpu(const void* x, DType dtype, size_t n, int threads);
void fp8_quantize_reference(const void* x, DType dtype, size_t n, float amax, uint8_t* codes);
void fp8_quantize_cpu(const void* x, DType dtype, size_t n, float amax, uint8_t* codes, int threads);
void fp8_dequantize_reference(const uint8_t* codes, size_t n, float amax, void* out, DType dtype);
void fp8_dequantize_cpu(const uint8_t* codes, size_t n, float amax, void* out, DType dtype,
                        int threads);

#if defined(ZB_HAVE_CUDA)
// The same on the GPU, one launch each on `stream` (fp8_amax_cuda: a clear and a launch); all
// pointers are device memory, the amax included. Errors: a block size quant_block_ok refuses,
// launch failures.
Status block_quantize_cuda(const void* x, DType dtype, size_t n, QuantFormat f, size_t block,
                           uint8_t* codes, float* scales, cudaStream_t stream);
Status block_dequantize_cuda(const uint8_t* codes, const float* scales, size_t n, QuantFormat f,
                             size_t block, void* out, DType dtype, cudaStream_t stream);
Status block_reduce_cuda(const QuantInputs& in, size_t n, QuantFormat f, size_t block,
                         uint8_t* codes, float* scales, cudaStream_t stream);
Status fp8_amax_cuda(const void* x, DType dtype, size_t n, float* amax, cudaStream_t stream);
Status fp8_quantize_cuda(const void* x, DType dtype, size_t n, const float* amax, uint8_t* codes,
                         cudaStream_t stream);
Status fp8_dequantize_cuda(const uint8_t* codes, size_t n, const float* amax, void* out,
                           DType dtype, cudaStream_t stream);
#endif

}  // namespace zb
