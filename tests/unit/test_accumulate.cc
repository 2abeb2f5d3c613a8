// Unit tests of gradient accumulation: the add kernels against element-wise references, the
// fused synthetic accumulation against writing and adding, and the exactness of sums over
// micro-batches and ranks in any order, which the bit-exact pipeline check rests on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/accumulate.h"
#include "kernels/synthetic.h"
#include "random_values.h"

namespace zb {
namespace {

std::vector<Bf16> weights(size_t n, uint64_t first) {
  std::vector<float> master(n);
  std::vector<Bf16> w(n);
  init_weights_cpu(master.data(), w.data(), n, first);
  return w;
}

TEST(Accumulate, AddsOnceRoundedInBf16AndFp32) {
  std::mt19937 rng(7);
  const size_t n = 1001;
  std::vector<float> a = random_values(n, -3, 3, rng), b = random_values(n, -3, 3, rng);
  std::vector<Bf16> ha(n), hb(n);
  for (size_t i = 0; i < n; ++i) ha[i] = float_to_bf16(a[i]), hb[i] = float_to_bf16(b[i]);
  std::vector<Bf16> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = bf16_add(ha[i], hb[i]);
  accumulate_cpu(ha.data(), hb.data(), DType::bf16, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(ha[i].bits, want[i].bits) << i;
  std::vector<float> fa = a;
  accumulate_cpu(fa.data(), b.data(), DType::f32, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(fa[i], a[i] + b[i]) << i;
}

// Above 16 ranks only every stride-th element is written by the fast paths; the values must
// be exactly the element-wise function's, at odd offsets and lengths.
TEST(Accumulate, SyntheticWriteAndAddMatchTheElementFunction) {
  for (int ranks : {1, 3, 16, 17, 40}) {
    for (uint64_t first : {uint64_t(0), uint64_t(5), uint64_t(1003)}) {
      const size_t n = 517;
      const std::vector<Bf16> w = weights(n, first);
      for (int rank : {0, ranks / 2, ranks - 1}) {
        std::vector<float> g(n, 0.25f), written(n, -7.0f);
        synthetic_grad_cpu(w.data(), written.data(), DType::f32, n, first, rank, ranks, 3);
        synthetic_grad_accumulate_cpu(w.data(), g.data(), DType::f32, n, first, rank, ranks, 3);
        for (size_t i = 0; i < n; ++i) {
          const float v = synthetic_grad(w[i], rank, ranks, 3, first + i);
          ASSERT_EQ(written[i], v) << ranks << " " << first << " " << rank << " " << i;
          ASSERT_EQ(g[i], 0.25f + v) << ranks << " " << first << " " << rank << " " << i;
        }
        std::vector<Bf16> gb(n, float_to_bf16(0.25f));
        synthetic_grad_accumulate_cpu(w.data(), gb.data(), DType::bf16, n, first, rank, ranks, 3);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(gb[i].bits, float_to_bf16(0.25f + synthetic_grad(w[i], rank, ranks, 3, first + i)).bits);
      }
    }
  }
}

// M micro-batches of N ranks contribute as M * N ranks: summed in BF16 in any order (by
// micro-batch then rank, by rank then micro-batch, shuffled) every element has the same bits.
TEST(Accumulate, SumsOverMicrobatchesAndRanksAreExactInAnyOrder) {
  const size_t n = 4096;
  const std::vector<Bf16> w = weights(n, 11);
  for (int contributors : {6, 16, 40, 96}) {
    std::vector<std::vector<Bf16>> grads(static_cast<size_t>(contributors), std::vector<Bf16>(n));
    for (int r = 0; r < contributors; ++r)
      synthetic_grad_cpu(w.data(), grads[size_t(r)].data(), DType::bf16, n, 11, r, contributors, 2);
    std::vector<int> order(static_cast<size_t>(contributors));
    std::iota(order.begin(), order.end(), 0);
    std::vector<Bf16> first;
    std::mt19937 rng(contributors);
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<Bf16> sum = grads[size_t(order[0])];
      for (size_t k = 1; k < order.size(); ++k)
        accumulate_cpu(sum.data(), grads[size_t(order[k])].data(), DType::bf16, n);
      if (trial == 0) first = sum;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(sum[i].bits, first[i].bits) << contributors << " " << i;
      std::reverse(order.begin(), order.end());
      if (trial == 1) std::shuffle(order.begin(), order.end(), rng);
    }
  }
}

}  // namespace
}  // namespace zb
