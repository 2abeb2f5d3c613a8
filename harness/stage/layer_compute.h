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
  // sleep: keep to a schedule (each sleep ends where the engine's timeline says, so one
  // sleep's overshoot is taken off the next); false for sleep-for, which sleeps a duration.
  bool keep_schedule = true;
  std::string text = "none";
};

// none | sleep:US | sleep-for:US | spin:US | gemm:TOKENS
//   sleep: the host idles (an accelerator busy while the CPU is free), keeping to a
//          schedule: it sleeps until a deadline, and a wake-up late by some microseconds
//          shortens the next sleep by as much, as an accelerator's kernels would run back to
//          back. So the ranks do not drift apart by the sum of their sleeps' overshoots;
//   sleep-for: the old emulation, each sleep a duration, its overshoot added to the step;
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
  // The schedule of sleep compute: a step starts it afresh, and a wait of compute for
  // communication of `seconds` absorbs as much of what the sleeps overran (the engine, that
  // far ahead, would have begun waiting that much earlier).
  void begin_step() { overrun_s_ = 0; }
  void waited(double seconds) { overrun_s_ = overrun_s_ > seconds ? overrun_s_ - seconds : 0; }

 private:
  LayerCompute(const ComputeSpec& spec, const ModelSpec& model, Compute& compute, int threads)
      : spec_(spec), model_(model), compute_(compute), threads_(threads) {}
  Status run(int layer, int repeats);
  void sleep(double seconds);
  ComputeSpec spec_;
  double overrun_s_ = 0;      // sleep: how far the host is behind the schedule
  const ModelSpec& model_;
  Compute& compute_;
  int threads_;
  Buffer a_, b_, c_;          // activations, weights, output for gemm
  void* cublas_ = nullptr;    // cublasHandle_t on GPU
};

}  // namespace zb
