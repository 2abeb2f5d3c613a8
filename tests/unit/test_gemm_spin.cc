// CPU GEMM against its triple-loop reference; the busy-wait, the bandwidth probes and the thread pool.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bandwidth.h"
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

// A clock that advances one microsecond at each read: the spin's exit condition is then a
// count, so the test reads no real clock.
struct TickingClock {
  using rep = int64_t;
  using period = std::micro;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<TickingClock>;
  static constexpr bool is_steady = true;
  static inline int64_t ticks = 0;
  static time_point now() { return time_point(duration(ticks++)); }
};

TEST(SpinCpu, SpinsUntilTheRequestedTimeHasPassedAndNoLonger) {
  struct Case {
    double seconds;
    int64_t reads;  // the first read, then one per tick until `end` is reached
  };
  // 2.5 us rounds up to 3 ticks; anything at or below zero reads no clock at all.
  for (Case c : {Case{0.0, 0}, Case{-1.0, 0}, Case{1e-6, 2}, Case{2.5e-6, 4}, Case{1e-3, 1001}}) {
    TickingClock::ticks = 0;
    EXPECT_EQ(spin_on<TickingClock>(c.seconds), c.reads) << c.seconds;
    EXPECT_EQ(TickingClock::ticks, c.reads) << c.seconds;
  }
  spin_cpu(1e-6);  // the steady-clock instance links and returns
}

// What each probe leaves in its arrays, element by element, from the same inputs.
static std::vector<std::vector<float>> expected(Pattern p, const std::vector<std::vector<float>>& in) {
  std::vector<std::vector<float>> out = in;
  for (size_t i = 0; i < in[0].size(); ++i) switch (p) {
      case Pattern::copy_stream:
      case Pattern::copy_plain: out[1][i] = in[0][i]; break;
      case Pattern::triad: out[2][i] = in[0][i] + 0.5f * in[1][i]; break;
      case Pattern::rmw:
        out[1][i] = 0.5f * in[1][i] + in[0][i];
        out[2][i] = 0.5f * in[2][i] + in[0][i];
        out[3][i] = 0.5f * in[3][i] + in[0][i] * in[0][i];
        break;
    }
  return out;
}

TEST(BandwidthCpu, EveryPatternComputesItsFormulaAtEverySizeAndAlignment) {
  for (Pattern p : bandwidth_patterns(false))
    // Offsets 0..3 floats: arrays that are and are not 16-byte aligned.
    for (size_t offset : {size_t(0), size_t(1), size_t(3)})
      for (size_t n : {size_t(0), size_t(1), size_t(5), size_t(64), size_t(100003)})
        for (int threads : {1, 2, 0}) {
          const int k = pattern_arrays(p);
          std::vector<std::vector<float>> in(static_cast<size_t>(k), std::vector<float>(n));
          for (int a = 0; a < k; ++a)
            for (size_t i = 0; i < n; ++i) in[size_t(a)][i] = float(i % 97) * 0.25f - float(a);
          // Each array inside a larger one, with sentinels on both sides.
          std::vector<std::vector<float>> mem(static_cast<size_t>(k), std::vector<float>(n + offset + 1, -7.0f));
          std::vector<float*> ptrs;
          for (int a = 0; a < k; ++a) {
            std::copy(in[size_t(a)].begin(), in[size_t(a)].end(), mem[size_t(a)].begin() + ptrdiff_t(offset));
            ptrs.push_back(mem[size_t(a)].data() + offset);
          }
          bandwidth_cpu(p, ptrs.data(), n, threads);
          auto want = expected(p, in);
          for (int a = 0; a < k; ++a) {
            for (size_t i = 0; i < n; ++i)
              ASSERT_EQ(mem[size_t(a)][offset + i], want[size_t(a)][i])
                  << pattern_name(p) << " array " << a << " element " << i;
            EXPECT_EQ(mem[size_t(a)][offset + n], -7.0f);
            if (offset > 0) {
              EXPECT_EQ(mem[size_t(a)][offset - 1], -7.0f);
            }
          }
        }
}

TEST(BandwidthCpu, BytesFollowTheReadsAndWrites) {
  EXPECT_EQ(pattern_bytes_per_element(Pattern::copy_stream), 8u);
  EXPECT_EQ(pattern_bytes_per_element(Pattern::copy_plain), 8u);
  EXPECT_EQ(pattern_bytes_per_element(Pattern::triad), 12u);
  EXPECT_EQ(pattern_bytes_per_element(Pattern::rmw), 28u);
  for (Pattern p : bandwidth_patterns(false)) EXPECT_EQ(pattern_bytes_per_element(p) % 4, 0u);
  EXPECT_EQ(bandwidth_patterns(false).size(), 4u);
  EXPECT_EQ(bandwidth_patterns(true).size(), 3u);
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

TEST(ThreadPool, WorkersAreNamedAndTaskZeroStaysOnTheCaller) {
  // Named so that top -H and a scheduler trace tell them apart; the caller keeps its own name.
  char caller[16] = {};
  pthread_getname_np(pthread_self(), caller, sizeof caller);
  std::vector<std::string> names(3);
  kernel_pool().run(3, [&](int i) {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    names[size_t(i)] = name;
  });
  EXPECT_EQ(names[0], caller);
  EXPECT_EQ(names[1], "zb-kernel");
  EXPECT_EQ(names[2], "zb-kernel");
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
