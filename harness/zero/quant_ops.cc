// The quantization kernels on the compute engine, dispatched by where its memory is, and timed.
#include "harness/zero/quant_ops.h"

#include "harness/core/clock.h"

#ifdef ZB_HAVE_CUDA
#include <cuda_runtime.h>
#define ZB_QSTREAM static_cast<cudaStream_t>(compute_.stream())
#endif

namespace zb {

namespace {

// Where a piece's scales start: after its codes, padded to a whole word.
const float* scales_of(const uint8_t* piece, QuantFormat f, size_t n) {
  return reinterpret_cast<const float*>(piece + (quant_code_bytes(f, n) + 3) / 4 * 4);
}
float* scales_of(uint8_t* piece, QuantFormat f, size_t n) {
  return reinterpret_cast<float*>(piece + (quant_code_bytes(f, n) + 3) / 4 * 4);
}

}  // namespace

QuantOps::~QuantOps() {
#ifdef ZB_HAVE_CUDA
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

// On the GPU each kernel lies between two events of its own on the stream; on the host the
// kernel has run when its call returns.
template <typename F>
Status QuantOps::timed(F&& kernel) {
#ifdef ZB_HAVE_CUDA
  if (compute_.kind() == MemKind::device) {
    while (events_.size() < used_ + 2) {
      cudaEvent_t e;
      ZB_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    ZB_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_]), ZB_QSTREAM));
    ZB_RETURN_IF_ERROR(kernel());
    ZB_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_ + 1]), ZB_QSTREAM));
    used_ += 2;
    return Status::ok();
  }
#endif
  const double t0 = now_seconds();
  ZB_RETURN_IF_ERROR(kernel());
  host_s_ += now_seconds() - t0;
  return Status::ok();
}

Status QuantOps::take_seconds(double* out) {
  double s = host_s_;
#ifdef ZB_HAVE_CUDA
  for (size_t i = 0; i + 1 < used_; i += 2) {
    float ms = 0;
    ZB_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]),
                                       static_cast<cudaEvent_t>(events_[i + 1])));
    s += double(ms) * 1e-3;
  }
#endif
  host_s_ = 0;
  used_ = 0;
  *out = s;
  return Status::ok();
}

Status QuantOps::quantize(const void* x, DType dtype, size_t n, QuantFormat f, size_t block, uint8_t* piece) {
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device)
      return block_quantize_cuda(x, dtype, n, f, block, piece, scales_of(piece, f, n), ZB_QSTREAM);
#endif
    block_quantize_cpu(x, dtype, n, f, block, piece, scales_of(piece, f, n), threads_);
    return Status::ok();
  });
}

Status QuantOps::dequantize(const uint8_t* piece, size_t n, QuantFormat f, size_t block, void* out, DType dtype) {
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device)
      return block_dequantize_cuda(piece, scales_of(piece, f, n), n, f, block, out, dtype, ZB_QSTREAM);
#endif
    block_dequantize_cpu(piece, scales_of(piece, f, n), n, f, block, out, dtype, threads_);
    return Status::ok();
  });
}

Status QuantOps::reduce(const uint8_t* first, size_t stride, int count, size_t n, QuantFormat f, size_t block,
                        uint8_t* piece) {
  const QuantInputs in{first, stride, scales_of(first, f, n), stride / 4, count};
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device)
      return block_reduce_cuda(in, n, f, block, piece, scales_of(piece, f, n), ZB_QSTREAM);
#endif
    block_reduce_cpu(in, n, f, block, piece, scales_of(piece, f, n), threads_);
    return Status::ok();
  });
}

Status QuantOps::fp8_amax(const void* x, DType dtype, size_t n, float* amax) {
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device) return fp8_amax_cuda(x, dtype, n, amax, ZB_QSTREAM);
#endif
    *amax = fp8_amax_cpu(x, dtype, n, threads_);
    return Status::ok();
  });
}

Status QuantOps::fp8_quantize(const void* x, DType dtype, size_t n, const float* amax, uint8_t* codes) {
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device) return fp8_quantize_cuda(x, dtype, n, amax, codes, ZB_QSTREAM);
#endif
    fp8_quantize_cpu(x, dtype, n, *amax, codes, threads_);
    return Status::ok();
  });
}

Status QuantOps::fp8_dequantize(const uint8_t* codes, size_t n, const float* amax, void* out, DType dtype) {
  return timed([&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (compute_.kind() == MemKind::device) return fp8_dequantize_cuda(codes, n, amax, out, dtype, ZB_QSTREAM);
#endif
    fp8_dequantize_cpu(codes, n, *amax, out, dtype, threads_);
    return Status::ok();
  });
}

}  // namespace zb
