// GPU busy-wait on clock64(), with SM cycles per second calibrated once per device.
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "kernels/spin.h"

namespace zb {

namespace {

__global__ void spin_kernel(long long cycles, long long* spun) {
  // clock64 counts the cycles of the SM this block runs on; one block, so one counter.
  const long long start = clock64();
  long long now = start;
  while ((now = clock64()) - start < cycles) {
  }
  if (spun && threadIdx.x == 0) *spun = now - start;
}

std::mutex g_mutex;
std::map<int, double> g_cycles_per_second;  // by device ordinal

// Times a spin of a known cycle count with events on a private stream, so the caller's stream
// does not wait for it. The first launch also loads the module, so only the second counts.
Status calibrate(int device, double* out) {
  int khz = 0;
  ZB_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  const double nominal = double(khz > 0 ? khz : 1000000) * 1e3;
  const long long cycles = (long long)(nominal * 0.02);  // about 20 ms
  cudaStream_t stream = nullptr;
  cudaEvent_t begin = nullptr, end = nullptr;
  ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Status status = [&]() -> Status {
    ZB_CUDA_CHECK(cudaEventCreate(&begin));
    ZB_CUDA_CHECK(cudaEventCreate(&end));
    float ms = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      ZB_CUDA_CHECK(cudaEventRecord(begin, stream));
      spin_kernel<<<1, 32, 0, stream>>>(cycles, nullptr);
      ZB_CUDA_CHECK(cudaGetLastError());
      ZB_CUDA_CHECK(cudaEventRecord(end, stream));
      ZB_CUDA_CHECK(cudaEventSynchronize(end));
      ZB_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    }
    ZB_CHECK(ms > 0, "spin calibration measured no time");
    *out = double(cycles) / (double(ms) * 1e-3);
    return Status::ok();
  }();
  if (begin) cudaEventDestroy(begin);
  if (end) cudaEventDestroy(end);
  cudaStreamDestroy(stream);
  return status;
}

}  // namespace

Status spin_cuda_cycles_per_second(double* out) {
  int device = 0;
  ZB_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_cycles_per_second.find(device);
  if (it == g_cycles_per_second.end()) {
    double rate = 0;
    ZB_RETURN_IF_ERROR(calibrate(device, &rate).context("calibrating spin_cuda"));
    it = g_cycles_per_second.emplace(device, rate).first;
  }
  *out = it->second;
  return Status::ok();
}

Status spin_cuda_cycles(long long cycles, cudaStream_t stream, long long* spun) {
  if (cycles <= 0) return Status::ok();
  spin_kernel<<<1, 32, 0, stream>>>(cycles, spun);
  ZB_CUDA_CHECK(cudaGetLastError());
  return Status::ok();
}

Status spin_cuda(double seconds, cudaStream_t stream) {
  if (!(seconds > 0)) return Status::ok();
  double rate = 0;
  ZB_RETURN_IF_ERROR(spin_cuda_cycles_per_second(&rate));
  return spin_cuda_cycles((long long)(seconds * rate + 0.5), stream, nullptr);
}

}  // namespace zb
