// Compute: a rank's compute engine (the calling thread on CPU, a CUDA stream on GPU) and
// the kernels the training step runs on it, dispatched by where the buffers live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness/compute/optimizer_config.h"
#include "harness/core/device.h"
#include "harness/core/status.h"
#include "kernels/optimizer.h"

namespace zb {

class Compute {
 public:
  // `threads`: CPU kernel threads (0 = all); ignored on GPU.
  static Status create(MemKind kind, int threads, std::unique_ptr<Compute>* out);
  ~Compute();

  MemKind kind() const { return kind_; }
  // The CPU threads this rank may use: its kernels' on CPU, host-side work (the reference) on
  // either engine.
  int cpu_threads() const { return threads_; }
  void* stream() const { return stream_; }  // cudaStream_t on GPU, null on CPU

  Status init_weights(float* master, Bf16* weights, size_t n, uint64_t first);
  Status synthetic_grad(const Bf16* weights, void* grad, DType dtype, size_t n, uint64_t first,
                        int rank, int ranks, int64_t step);
  // Micro-batch accumulation: grad += the synthetic gradient (fused, as Megatron's wgrad GEMM
  // adds into main_grad), and dst += src for n gradient elements (a reduced block into a shard).
  Status synthetic_grad_accumulate(const Bf16* weights, void* grad, DType dtype, size_t n,
                                   uint64_t first, int rank, int ranks, int64_t step);
  Status accumulate(void* dst, const void* src, DType dtype, size_t n);
  // One optimizer step over n elements; `moments` holds m (and v for Adam) back to back.
  Status update(const OptimizerConfig& opt, const void* grad, DType grad_dtype, float* master,
                float* m, float* v, Bf16* weights, size_t n, int64_t step, float grad_scale);
  Status zero(void* dst, size_t bytes);
  Status copy(void* dst, const void* src, size_t bytes);
  // Waits until everything queued on the engine has finished (no-op on CPU).
  Status synchronize();

  // Time marks on the engine, numbered from 0 by the caller: a CUDA event recorded on the
  // stream on GPU, the host clock on CPU (where compute has finished when its call
  // returns). Marks around a stream wait time how long the engine stood still for it.
  Status mark(size_t index);
  // Seconds from mark a to mark b; on GPU only once the engine has passed both.
  Status seconds_between(size_t a, size_t b, double* out);

 private:
  MemKind kind_ = MemKind::host;
  int threads_ = 0;
  void* stream_ = nullptr;
  std::vector<double> host_marks_;
  std::vector<void*> event_marks_;  // cudaEvent_t
};

}  // namespace zb
