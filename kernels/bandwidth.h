// Memory-bandwidth probes: simple access patterns whose best speed is the limit the optimizer
// kernels are held against. A limit must bound every kernel compared with it, so it is the
// fastest of several patterns, not one copy: streaming and ordinary stores, a triad, and an
// in-place read-modify-write of several arrays shaped like an optimizer's.
#pragma once

#include <cstddef>
#include <vector>

#if defined(ZB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

// copy_stream:  a1 = a0, non-temporal stores where the CPU has them (STREAM's copy)
// copy_plain:   a1 = a0, ordinary stores
// triad:        a2 = a0 + s * a1
// rmw:          a1 = s * a1 + a0;  a2 = s * a2 + a0;  a3 = s * a3 + a0 * a0
//               (read one array, update three in place: the traffic of a fused Adam step)
enum class Pattern { copy_stream, copy_plain, triad, rmw };
const char* pattern_name(Pattern p);
// The patterns that run on this engine: all four on CPU; on GPU the store kinds are one.
std::vector<Pattern> bandwidth_patterns(bool gpu);

// Arrays of floats a pattern uses, and the bytes it is credited per element, as STREAM
// counts them (each array element read and each written once; no write-allocate traffic).
int pattern_arrays(Pattern p);
size_t pattern_bytes_per_element(Pattern p);

// Runs `p` over pattern_arrays(p) arrays of n floats with up to `threads` pool threads (0 =
// every hardware thread), each a contiguous chunk, the split the optimizer kernels use.
void bandwidth_cpu(Pattern p, float* const* arrays, size_t n, int threads);

#if defined(ZB_HAVE_CUDA)
// One launch on `stream` (grid-stride, 16-byte accesses where the arrays allow), the launch
// shape of the optimizer kernels.
Status bandwidth_cuda(Pattern p, float* const* arrays, size_t n, cudaStream_t stream);
#endif

}  // namespace zb
