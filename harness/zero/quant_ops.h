// The quantization kernels as the ZeRO step runs them around its quantized collectives: on the
// rank's compute engine (the CPU kernels on the host, CUDA on the compute stream), each timed,
// on pieces laid out as they travel (stage/quantization.h: codes, then block scales).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/compute/compute.h"
#include "harness/stage/quantization.h"

namespace zb {

class QuantOps {
 public:
  QuantOps(Compute& compute, int threads) : compute_(compute), threads_(threads) {}
  ~QuantOps();
  QuantOps(const QuantOps&) = delete;
  QuantOps& operator=(const QuantOps&) = delete;

  // Block formats (int8, int4), `block` elements a scale: n values of `dtype` into one piece,
  // one piece back into n values of `dtype`, and qgZ's step: `count` pieces of n elements,
  // piece j at first + j * stride bytes, dequantized, summed in order and requantized into one.
  Status quantize(const void* x, DType dtype, size_t n, QuantFormat f, size_t block, uint8_t* piece);
  Status dequantize(const uint8_t* piece, size_t n, QuantFormat f, size_t block, void* out, DType dtype);
  Status reduce(const uint8_t* first, size_t stride, int count, size_t n, QuantFormat f, size_t block,
                uint8_t* piece);
  // FP8 with the tensor's amax, a float in the engine's memory: the amax of n values into it,
  // n values cast with a given amax, and back.
  Status fp8_amax(const void* x, DType dtype, size_t n, float* amax);
  Status fp8_quantize(const void* x, DType dtype, size_t n, const float* amax, uint8_t* codes);
  Status fp8_dequantize(const uint8_t* codes, size_t n, const float* amax, void* out, DType dtype);

  // The kernels' time since the last call, and what was queued since: host-timed on CPUs, by
  // event pairs on the stream on GPUs (read once the engine has passed them: after a sync).
  Status take_seconds(double* out);

 private:
  template <typename F>
  Status timed(F&& kernel);
  Compute& compute_;
  int threads_;
  double host_s_ = 0;
  std::vector<void*> events_;  // cudaEvent_t, start and stop of each kernel in order
  size_t used_ = 0;
};

}  // namespace zb
