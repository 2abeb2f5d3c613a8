// Calibrated busy-waits: stand-in compute of a chosen duration, on a CPU core or a GPU stream.
#pragma once

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

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
#endif

}  // namespace zb
