// Calibrated busy-waits: stand-in compute of a chosen duration, on a CPU core or a GPU stream.
#pragma once

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

#include <chrono>
#include <cstdint>

namespace zb {

// The busy-wait over any clock with a static now(): reads it until `seconds` (rounded up to
// the clock's tick, so never shorter) have passed since the first read, and returns how many
// reads that took. spin_cpu runs it on steady_clock; the tests run it on a clock that ticks
// once per read, so the bound is checked by counting, not by timing.
template <class Clock>
int64_t spin_on(double seconds) {
  if (!(seconds > 0)) return 0;
  const auto wait = std::chrono::ceil<typename Clock::duration>(std::chrono::duration<double>(seconds));
  const typename Clock::time_point end = Clock::now() + wait;
  int64_t reads = 1;
  // Reading the clock is itself the work: about 20 ns a call through the vDSO for the steady
  // clock, so the wait overshoots by that much at most, and the core stays busy throughout.
  while (++reads, Clock::now() < end) {
  }
  return reads;
}

// Busy-waits on the calling thread (it keeps the core, unlike sleeping) until `seconds` of
// steady_clock time have passed; returns at once for seconds <= 0.
void spin_cpu(double seconds);

#if defined(ZB_HAVE_CUDA)
// Enqueues a one-warp kernel on `stream` that spins on clock64() for `seconds`: it keeps the
// stream busy (what an overlap measurement needs) but leaves the other SMs free. The first
// call on a device calibrates SM cycles per second against CUDA events (the clock-rate
// attribute is a nominal, not the boosted, clock) and blocks the host while it does.
Status spin_cuda(double seconds, cudaStream_t stream);

// The calibrated SM clock of the current device, in cycles per second.
Status spin_cuda_cycles_per_second(double* out);

// The spin itself, `cycles` SM cycles long; with `spun` (device memory) the kernel writes
// there how many cycles it saw pass before it left, so a test checks its exit by counting.
Status spin_cuda_cycles(long long cycles, cudaStream_t stream, long long* spun);
#endif

}  // namespace zb
