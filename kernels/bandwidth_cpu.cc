// Bandwidth probes on the kernel thread pool, with non-temporal stores where x86 has them.
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "kernels/bandwidth.h"
#include "kernels/thread_pool.h"

namespace zb {

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::copy_stream: return "copy";
    case Pattern::copy_plain: return "copy_plain";
    case Pattern::triad: return "triad";
    case Pattern::rmw: return "rmw";
  }
  return "?";
}

std::vector<Pattern> bandwidth_patterns(bool gpu) {
  if (gpu) return {Pattern::copy_stream, Pattern::triad, Pattern::rmw};
  return {Pattern::copy_stream, Pattern::copy_plain, Pattern::triad, Pattern::rmw};
}

int pattern_arrays(Pattern p) {
  switch (p) {
    case Pattern::copy_stream:
    case Pattern::copy_plain: return 2;
    case Pattern::triad: return 3;
    case Pattern::rmw: return 4;
  }
  return 0;
}

size_t pattern_bytes_per_element(Pattern p) {
  // Reads plus writes of 4-byte floats: copy 1 + 1, triad 2 + 1, rmw 4 + 3.
  switch (p) {
    case Pattern::copy_stream:
    case Pattern::copy_plain: return 8;
    case Pattern::triad: return 12;
    case Pattern::rmw: return 28;
  }
  return 0;
}

namespace {

constexpr float kScale = 0.5f;

// Non-temporal stores skip reading the destination line before writing it, so a copy moves
// the 8 bytes per element it is credited with rather than 12. SSE2 is baseline on x86-64,
// and 16-byte streaming stores already saturate memory, so no wider clones are needed.
void copy_stream_chunk(float* dst, const float* src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
  // Streaming stores are weakly ordered: fence so the result is visible once the call returns.
  _mm_sfence();
#else
  std::memcpy(dst, src, n * sizeof(float));
#endif
}

// Plain loops in one version per micro-architecture level, as the optimizer kernels are, so
// the probe is never the narrower code of the two.
#if defined(__x86_64__)
#define ZB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ZB_CLONES
#endif

ZB_CLONES void copy_plain_chunk(float* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

void triad_chunk(float* dst, const float* a, const float* b, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = a[i] + kScale * b[i];
  const __m128 s = _mm_set1_ps(kScale);
  for (; i + 4 <= n; i += 4)
    _mm_stream_ps(dst + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_mul_ps(s, _mm_loadu_ps(b + i))));
  for (; i < n; ++i) dst[i] = a[i] + kScale * b[i];
  _mm_sfence();
#else
  for (size_t i = 0; i < n; ++i) dst[i] = a[i] + kScale * b[i];
#endif
}

ZB_CLONES void rmw_chunk(const float* __restrict g, float* __restrict x, float* __restrict y,
               float* __restrict z, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i];
    x[i] = kScale * x[i] + gi;
    y[i] = kScale * y[i] + gi;
    z[i] = kScale * z[i] + gi * gi;
  }
}

}  // namespace

void bandwidth_cpu(Pattern p, float* const* a, size_t n, int threads) {
  parallel_chunks(n, threads, 64, size_t(1) << 15, [&](size_t begin, size_t end) {
    size_t m = end - begin;
    switch (p) {
      case Pattern::copy_stream: copy_stream_chunk(a[1] + begin, a[0] + begin, m); break;
      case Pattern::copy_plain: copy_plain_chunk(a[1] + begin, a[0] + begin, m); break;
      case Pattern::triad: triad_chunk(a[2] + begin, a[0] + begin, a[1] + begin, m); break;
      case Pattern::rmw: rmw_chunk(a[0] + begin, a[1] + begin, a[2] + begin, a[3] + begin, m); break;
    }
  });
}

}  // namespace zb
