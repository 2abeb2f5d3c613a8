// BF16 GEMM on the CPU: FP32 panels packed per tile, a 4-row kernel GCC vectorises along rows.
#include <algorithm>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/thread_pool.h"

namespace zb {

namespace {

// A tile of C is kTileM x kTileN; its sums stay in an FP32 buffer across the kTileK-deep
// panels of A and B, which are converted from BF16 once per tile. The B panel (128 KB) sits in
// L2. Repacking B for each row tile costs 1/kTileM of the multiply-adds.
constexpr int kTileM = 64;
constexpr int kTileN = 256;
constexpr int kTileK = 128;

struct Scratch {
  std::vector<float> acc = std::vector<float>(size_t(kTileM) * kTileN);
  std::vector<float> a = std::vector<float>(size_t(kTileM) * kTileK);
  std::vector<float> b = std::vector<float>(size_t(kTileK) * kTileN);
};

// acc[r][:] += sum over kk of a[r][kk] * b[kk][:], for four rows r at once so each loaded B
// value feeds four multiply-adds. Columns past the tile's edge are zero in b and never stored.
#if defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void kernel_4rows(const float* a, const float* b, float* acc, int kc) {
  // Column strips of kStrip: the 4 x kStrip sums live in registers across the whole depth, so
  // a multiply-add costs no load or store of C (3x faster than updating C rows in L1). 16
  // columns fit AVX2's 16 registers; 64 spills and runs 4x slower.
  constexpr int kStrip = 16;
  for (int j0 = 0; j0 < kTileN; j0 += kStrip) {
    float t0[kStrip], t1[kStrip], t2[kStrip], t3[kStrip];
    for (int j = 0; j < kStrip; ++j) {
      t0[j] = acc[j0 + j];
      t1[j] = acc[kTileN + j0 + j];
      t2[j] = acc[2 * kTileN + j0 + j];
      t3[j] = acc[3 * kTileN + j0 + j];
    }
    for (int kk = 0; kk < kc; ++kk) {
      const float* row = b + size_t(kk) * kTileN + j0;
      float a0 = a[kk], a1 = a[kTileK + kk], a2 = a[2 * kTileK + kk], a3 = a[3 * kTileK + kk];
      for (int j = 0; j < kStrip; ++j) {
        t0[j] += a0 * row[j];
        t1[j] += a1 * row[j];
        t2[j] += a2 * row[j];
        t3[j] += a3 * row[j];
      }
    }
    for (int j = 0; j < kStrip; ++j) {
      acc[j0 + j] = t0[j];
      acc[kTileN + j0 + j] = t1[j];
      acc[2 * kTileN + j0 + j] = t2[j];
      acc[3 * kTileN + j0 + j] = t3[j];
    }
  }
}

void gemm_tile(const Bf16* a, const Bf16* b, void* c, DType c_dtype, int n, int k, int i0, int j0,
               int mc, int nc, Scratch* s) {
  std::fill(s->acc.begin(), s->acc.end(), 0.0f);
  // Rows of A past mc stay zero, so the 4-row kernel can run over a partial last group.
  std::fill(s->a.begin(), s->a.end(), 0.0f);
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    int kc = std::min(kTileK, k - k0);
    for (int kk = 0; kk < kc; ++kk) {
      const Bf16* src = b + size_t(k0 + kk) * n + j0;
      float* dst = s->b.data() + size_t(kk) * kTileN;
      for (int j = 0; j < nc; ++j) dst[j] = bf16_to_float(src[j]);
      std::fill(dst + nc, dst + kTileN, 0.0f);
    }
    for (int i = 0; i < mc; ++i) {
      const Bf16* src = a + size_t(i0 + i) * k + k0;
      float* dst = s->a.data() + size_t(i) * kTileK;
      for (int kk = 0; kk < kc; ++kk) dst[kk] = bf16_to_float(src[kk]);
    }
    for (int i = 0; i < mc; i += 4)
      kernel_4rows(s->a.data() + size_t(i) * kTileK, s->b.data(),
                   s->acc.data() + size_t(i) * kTileN, kc);
  }
  for (int i = 0; i < mc; ++i) {
    const float* src = s->acc.data() + size_t(i) * kTileN;
    size_t row = size_t(i0 + i) * n + j0;
    if (c_dtype == DType::f32) {
      std::copy(src, src + nc, static_cast<float*>(c) + row);
    } else {
      Bf16* dst = static_cast<Bf16*>(c) + row;
      for (int j = 0; j < nc; ++j) dst[j] = float_to_bf16(src[j]);
    }
  }
}

}  // namespace

void gemm_cpu_bf16(const Bf16* a, const Bf16* b, void* c, DType c_dtype, int m, int n, int k,
                   int threads) {
  if (m <= 0 || n <= 0) return;
  const size_t tiles_m = size_t(m + kTileM - 1) / kTileM;
  const size_t tiles_n = size_t(n + kTileN - 1) / kTileN;
  // Threads take contiguous runs of tiles, row tiles outermost, so neighbours share A rows.
  parallel_chunks(tiles_m * tiles_n, threads, 1, 1, [&](size_t begin, size_t end) {
    thread_local Scratch scratch;
    for (size_t t = begin; t < end; ++t) {
      int i0 = int(t / tiles_n) * kTileM, j0 = int(t % tiles_n) * kTileN;
      gemm_tile(a, b, c, c_dtype, n, k, i0, j0, std::min(kTileM, m - i0), std::min(kTileN, n - j0),
                &scratch);
    }
  });
}

void gemm_reference_bf16(const Bf16* a, const Bf16* b, double* c, int m, int n, int k) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int kk = 0; kk < k; ++kk)
        sum += double(bf16_to_float(a[size_t(i) * k + kk])) * bf16_to_float(b[size_t(kk) * n + j]);
      c[size_t(i) * n + j] = sum;
    }
}

}  // namespace zb
