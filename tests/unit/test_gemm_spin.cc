// CPU GEMM against its triple-loop reference; the busy-wait, the copy and the thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "kernels/copy.h"
#include "kernels/gemm.h"
#include "kernels/spin.h"
#include "kernels/thread_pool.h"

namespace zb {
namespace {

std::vector<Bf16> random_bf16(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Bf16> out(n);
  for (Bf16& x : out) x = float_to_bf16(dist(rng));
  return out;
}

// Inputs are exact in FP32 and each product of two BF16 values is exact too, so the only error
// is the k FP32 additions: at most k * 2^-24 * sum |a_i b_i| (the classic bound for recursive
// summation). Blocked and reference sums come in different orders, so nothing tighter holds.
void check_gemm(int m, int n, int k, int threads) {
  std::mt19937 rng(unsigned(m * 10007 + n * 101 + k));
  std::vector<Bf16> a = random_bf16(size_t(m) * k, rng), b = random_bf16(size_t(k) * n, rng);
  std::vector<double> want(size_t(m) * n);
  gemm_reference_bf16(a.data(), b.data(), want.data(), m, n, k);
  std::vector<float> got(size_t(m) * n, -7.0f);
  std::vector<Bf16> got_bf16(size_t(m) * n);
  gemm_cpu_bf16(a.data(), b.data(), got.data(), DType::f32, m, n, k, threads);
  gemm_cpu_bf16(a.data(), b.data(), got_bf16.data(), DType::bf16, m, n, k, threads);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double abs_sum = 0;
      for (int kk = 0; kk < k; ++kk)
        abs_sum += std::fabs(double(bf16_to_float(a[size_t(i) * k + kk])) *
                             bf16_to_float(b[size_t(kk) * n + j]));
      size_t at = size_t(i) * n + j;
      ASSERT_LE(std::fabs(got[at] - want[at]), k * std::ldexp(abs_sum, -24) + 1e-30)
          << m << "x" << n << "x" << k << " at (" << i << ", " << j << ")";
      ASSERT_EQ(got_bf16[at].bits, float_to_bf16(got[at]).bits) << "(" << i << ", " << j << ")";
    }
}

TEST(GemmCpu, MatchesReferenceOnOddSizes) {
  // Sizes straddle the 64 x 256 x 128 tiles: partial tiles and partial 4-row groups.
  const int sizes[][3] = {{1, 1, 1},      {3, 5, 7},       {4, 256, 128}, {17, 33, 65},
                          {65, 257, 129}, {130, 300, 260}, {7, 1, 300}};
  for (const auto& s : sizes)
    for (int threads : {1, 3, 0}) check_gemm(s[0], s[1], s[2], threads);
}

TEST(GemmCpu, ZeroDepthGivesZeros) {
  std::vector<float> c(6, 5.0f);
  gemm_cpu_bf16(nullptr, nullptr, c.data(), DType::f32, 2, 3, 0, 0);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

TEST(GemmCpu, FlopCount) { EXPECT_EQ(gemm_flops(2, 3, 4), 48.0); }

TEST(SpinCpu, SpinsAtLeastTheRequestedTime) {
  // Only a lower bound: on a shared machine the thread can be descheduled for any time.
  using Clock = std::chrono::steady_clock;
  for (double seconds : {0.0, 1e-6, 1e-3, 0.02}) {
    auto start = Clock::now();
    spin_cpu(seconds);
    std::chrono::duration<double> elapsed = Clock::now() - start;
    EXPECT_GE(elapsed.count(), seconds);
  }
  spin_cpu(-1.0);  // returns at once
}

TEST(CopyCpu, CopiesEverySizeAndAlignment) {
  std::vector<float> src(100003), dst(100010);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.5f;
  // Offsets 0..3 floats: destinations that are and are not 16-byte aligned.
  for (size_t offset : {size_t(0), size_t(1), size_t(3)})
    for (size_t n : {size_t(0), size_t(1), size_t(5), size_t(64), size_t(100003 - 3)})
      for (int threads : {1, 2, 0}) {
        std::fill(dst.begin(), dst.end(), -1.0f);
        double seconds = copy_cpu(dst.data() + offset, src.data(), n, threads);
        EXPECT_GE(seconds, 0.0);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[offset + i], src[i]) << i;
        EXPECT_EQ(dst[offset + n], -1.0f);
        if (offset > 0) {
          EXPECT_EQ(dst[offset - 1], -1.0f);
        }
      }
  EXPECT_EQ(copy_bytes_per_element(), 8u);
}

TEST(ThreadPool, RunsEveryTaskOnceAndNests) {
  std::vector<std::atomic<int>> hits(37);
  kernel_pool().run(37, [&](int i) { hits[size_t(i)]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  // A run from inside a task goes inline instead of waiting for the busy pool.
  std::atomic<int> inner{0};
  kernel_pool().run(4, [&](int) { kernel_pool().run(3, [&](int) { inner++; }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, ChunksCoverTheRangeOnGrainBoundaries) {
  for (size_t n : {size_t(1), size_t(63), size_t(1000), size_t(1) << 20})
    for (int threads : {1, 2, 5, 0}) {
      std::vector<std::atomic<int>> seen(n);
      std::atomic<int> misaligned{0};
      parallel_chunks(n, threads, 64, 256, [&](size_t begin, size_t end) {
        if (begin % 64 != 0) misaligned++;
        for (size_t i = begin; i < end; ++i) seen[i]++;
      });
      EXPECT_EQ(misaligned.load(), 0);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
    }
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  std::atomic<long> total{0};
  auto work = [&] {
    for (int r = 0; r < 50; ++r) kernel_pool().run(3, [&](int i) { total += i + 1; });
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  EXPECT_EQ(total.load(), 2 * 50 * 6);
}

}  // namespace
}  // namespace zb
