// Layer compute: what stands in for a layer's forward and backward in the step, so that
// communication has something to hide behind. Backward costs twice the forward.
#pragma once

#include <memory>
#include <string>

#include "harness/compute/compute.h"
#include "harness/stage/model.h"

namespace zb {

struct ComputeSpec {
  enum class Kind { none, sleep, spin, gemm } kind = Kind::none;
  double seconds = 0;   // sleep, spin: per layer forward
  int64_t tokens = 0;   // gemm: rows of the activations
  std::string text = "none";
};

// none | sleep:US | spin:US | gemm:TOKENS
//   sleep: the host idles (an accelerator busy while the CPU is free);
//   spin:  the compute engine busy-waits for a calibrated time (a kernel on GPU, the
//          rank's thread on CPU);
//   gemm:  the layer's real matrix shapes (cuBLAS BF16 on GPU, blocked CPU GEMM).
Status parse_compute_spec(const std::string& text, ComputeSpec* out);

class LayerCompute {
 public:
  static Status create(const ComputeSpec& spec, const ModelSpec& model, Compute& compute,
                       int cpu_threads, std::unique_ptr<LayerCompute>* out);
  ~LayerCompute();
  Status forward(int layer);
  Status backward(int layer);
  const ComputeSpec& spec() const { return spec_; }

 private:
  LayerCompute(const ComputeSpec& spec, const ModelSpec& model, Compute& compute, int threads)
      : spec_(spec), model_(model), compute_(compute), threads_(threads) {}
  Status run(int layer, int repeats);
  ComputeSpec spec_;
  const ModelSpec& model_;
  Compute& compute_;
  int threads_;
  Buffer a_, b_, c_;          // activations, weights, output for gemm
  void* cublas_ = nullptr;    // cublasHandle_t on GPU
};

}  // namespace zb
