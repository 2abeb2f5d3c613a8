// STREAM-style copy: the memory-bandwidth limit the optimizer kernels are measured against.
#pragma once

#include <cstddef>

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/status.h"
#endif

namespace zb {

// A copy reads and writes each float once: 8 bytes per element, as STREAM counts it.
constexpr size_t copy_bytes_per_element() { return 2 * sizeof(float); }

// Copies n floats with up to `threads` pool threads (0 = every hardware thread), each a
// contiguous chunk, the same split the optimizer kernels use. Returns the wall seconds the copy
// took, so a caller can turn it into GB/s without its own clock.
double copy_cpu(float* dst, const float* src, size_t n, int threads);

#if defined(ZB_HAVE_CUDA)
// Device-to-device copy as one kernel launch on `stream` (16-byte accesses, grid-stride), the
// same shape as the optimizer kernels, so their ratio compares like with like.
Status copy_cuda(float* dst, const float* src, size_t n, cudaStream_t stream);
#endif

}  // namespace zb
