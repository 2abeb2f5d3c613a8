// Compute: CPU kernels run inline; CUDA kernels go on the rank's compute stream.
#include "harness/compute/compute.h"

#include <cstring>

#include "harness/core/clock.h"
#include "kernels/accumulate.h"
#include "kernels/synthetic.h"

#ifdef ZB_HAVE_CUDA
#include <cuda_runtime.h>
#define ZB_STREAM static_cast<cudaStream_t>(stream_)
#endif

namespace zb {

Status Compute::create(MemKind kind, int threads, std::unique_ptr<Compute>* out) {
  auto c = std::unique_ptr<Compute>(new Compute());
  c->kind_ = kind;
  c->threads_ = threads;
  if (kind == MemKind::device) {
#ifdef ZB_HAVE_CUDA
    cudaStream_t s;
    ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    c->stream_ = s;
#else
    return Status::error("GPU compute needs a CUDA build");
#endif
  }
  *out = std::move(c);
  return Status::ok();
}

Compute::~Compute() {
#ifdef ZB_HAVE_CUDA
  for (void* e : event_marks_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  if (stream_) cudaStreamDestroy(ZB_STREAM);
#endif
}

Status Compute::mark(size_t index) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    while (event_marks_.size() <= index) {
      cudaEvent_t e;
      ZB_CUDA_CHECK(cudaEventCreate(&e));
      event_marks_.push_back(e);
    }
    ZB_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_marks_[index]), ZB_STREAM));
    return Status::ok();
  }
#endif
  if (host_marks_.size() <= index) host_marks_.resize(index + 1);
  host_marks_[index] = now_seconds();
  return Status::ok();
}

Status Compute::seconds_between(size_t a, size_t b, double* out) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    float ms = 0;
    ZB_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_marks_.at(a)),
                                       static_cast<cudaEvent_t>(event_marks_.at(b))));
    *out = double(ms) * 1e-3;
    return Status::ok();
  }
#endif
  *out = host_marks_.at(b) - host_marks_.at(a);
  return Status::ok();
}

Status Compute::init_weights(float* master, Bf16* weights, size_t n, uint64_t first) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) return init_weights_cuda(master, weights, n, first, ZB_STREAM);
#endif
  init_weights_cpu(master, weights, n, first);
  return Status::ok();
}

Status Compute::synthetic_grad(const Bf16* weights, void* grad, DType dtype, size_t n,
                               uint64_t first, int rank, int ranks, int64_t step) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device)
    return synthetic_grad_cuda(weights, grad, dtype, n, first, rank, ranks, step, ZB_STREAM);
#endif
  synthetic_grad_cpu(weights, grad, dtype, n, first, rank, ranks, step);
  return Status::ok();
}

Status Compute::synthetic_grad_accumulate(const Bf16* weights, void* grad, DType dtype, size_t n,
                                          uint64_t first, int rank, int ranks, int64_t step) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device)
    return synthetic_grad_accumulate_cuda(weights, grad, dtype, n, first, rank, ranks, step, ZB_STREAM);
#endif
  synthetic_grad_accumulate_cpu(weights, grad, dtype, n, first, rank, ranks, step);
  return Status::ok();
}

Status Compute::accumulate(void* dst, const void* src, DType dtype, size_t n) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) return accumulate_cuda(dst, src, dtype, n, ZB_STREAM);
#endif
  accumulate_cpu(dst, src, dtype, n);
  return Status::ok();
}

Status Compute::update(const OptimizerConfig& opt, const void* grad, DType grad_dtype,
                       float* master, float* m, float* v, Bf16* weights, size_t n, int64_t step,
                       float grad_scale) {
  if (n == 0) return Status::ok();
  AdamParams adam = opt.adam;
  adam.step = step;
  adam.grad_scale = grad_scale;
  MomentumParams mom = opt.momentum;
  mom.grad_scale = grad_scale;
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    if (opt.kind == Optimizer::adam)
      return adam_cuda(grad, grad_dtype, master, m, v, weights, n, adam, ZB_STREAM);
    return momentum_cuda(grad, grad_dtype, master, m, weights, n, mom, ZB_STREAM);
  }
#endif
  if (opt.kind == Optimizer::adam) adam_cpu(grad, grad_dtype, master, m, v, weights, n, adam, threads_);
  else momentum_cpu(grad, grad_dtype, master, m, weights, n, mom, threads_);
  return Status::ok();
}

Status Compute::zero(void* dst, size_t bytes) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    ZB_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ZB_STREAM));
    return Status::ok();
  }
#endif
  std::memset(dst, 0, bytes);
  return Status::ok();
}

Status Compute::copy(void* dst, const void* src, size_t bytes) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    ZB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ZB_STREAM));
    return Status::ok();
  }
#endif
  std::memmove(dst, src, bytes);
  return Status::ok();
}

Status Compute::synchronize() {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) ZB_CUDA_CHECK(cudaStreamSynchronize(ZB_STREAM));
#endif
  return Status::ok();
}

}  // namespace zb
