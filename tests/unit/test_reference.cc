// The single-process references split their work over the rank's CPU threads: the state they end
// in must not depend on how many, nor on where the chunks are cut (inside a group of 8 elements
// that share a hash, across two segments, or, for the quantized check, between qgZ's blocks).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "harness/compute/compute.h"
#include "harness/stage/quant_reference.h"
#include "harness/stage/reference.h"
#include "kernels/synthetic.h"

namespace zb {
namespace {

CheckState reference_with(int threads, int ranks, DType grad, Optimizer kind) {
  StageConfig config;
  config.grad_dtype = grad;
  config.optimizer.kind = kind;
  // Segments that start and end inside hash groups, and a gap between them in flat indices.
  const std::vector<Segment> segments = {{5, 0, 0, 100003}, {300001, 100003, 100003, 77777}};
  std::unique_ptr<Compute> compute;
  EXPECT_TRUE(Compute::create(MemKind::host, threads, &compute).ok());
  CheckState out;
  Status s = reference_state(config, ranks, 3, segments, *compute, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

class ReferenceThreads : public ::testing::TestWithParam<std::tuple<int, DType, Optimizer>> {};

TEST_P(ReferenceThreads, EndsInTheSameBitsOnOneThreadOrMany) {
  const auto [ranks, grad, kind] = GetParam();
  const CheckState one = reference_with(1, ranks, grad, kind);
  ASSERT_EQ(one.weights.size(), 177780u);
  // The steps moved the state: a reference that did nothing would also agree with itself.
  uint64_t moved = 0;
  for (size_t i = 0; i < one.master.size(); ++i) {
    const uint64_t flat = i < 100003 ? 5 + i : 300001 + (i - 100003);
    moved += one.master[i] != initial_weight(flat);
  }
  EXPECT_GT(moved, one.master.size() / 2);
  for (int threads : {2, 3, 7}) {
    const CheckState many = reference_with(threads, ranks, grad, kind);
    EXPECT_EQ(count_mismatches(many, one), 0u) << threads << " threads";
  }
}

// 20 ranks take the path where only every second rank adds to an element.
INSTANTIATE_TEST_SUITE_P(Reference, ReferenceThreads,
                         ::testing::Values(std::make_tuple(1, DType::bf16, Optimizer::adam),
                                           std::make_tuple(3, DType::f32, Optimizer::momentum),
                                           std::make_tuple(20, DType::bf16, Optimizer::adam)));

// The quantized check's interval, on one thread and on several: the same bits of the reference
// and of both ends. Segments of several qgZ blocks and a part block each; 8 ranks as 2 nodes
// of 4 take the two-hop error path, and FP8 the bound combined over ranks (one process here).
BoundedState bounded_with(int threads, WeightQuant wq, GradQuant gq) {
  StageConfig config;
  config.stage = Stage::z3;
  config.quant.weights = wq;
  config.quant.grads = gq;
  const std::vector<Segment> segments = {{5, 0, 0, 3 * kGradQuantBlock + 77}, {90001, 0, 0, 2 * kGradQuantBlock + 1}};
  BoundedState out;
  Status s = bounded_reference(config, {8, 4, 2}, 3, segments, [](std::vector<double>*) { return Status::ok(); },
                               threads, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

class BoundedThreads : public ::testing::TestWithParam<std::tuple<WeightQuant, GradQuant>> {};

TEST_P(BoundedThreads, EndsInTheSameBitsOnOneThreadOrMany) {
  const auto [wq, gq] = GetParam();
  const BoundedState one = bounded_with(1, wq, gq);
  const size_t n = 5 * kGradQuantBlock + 78;
  ASSERT_EQ(one.master_lo.size(), n);
  // The interval is not empty nor a point: a run that skipped the bounds would agree with itself.
  size_t open = 0;
  for (size_t i = 0; i < n; ++i) open += one.master_lo[i] < one.master_hi[i];
  EXPECT_EQ(open, n);
  for (int threads : {2, 3, 7}) {
    const BoundedState many = bounded_with(threads, wq, gq);
    EXPECT_EQ(count_mismatches(many.ref, one.ref), 0u) << threads << " threads";
    EXPECT_EQ(0, std::memcmp(many.master_lo.data(), one.master_lo.data(), n * 4)) << threads << " threads";
    EXPECT_EQ(0, std::memcmp(many.master_hi.data(), one.master_hi.data(), n * 4)) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Bounded, BoundedThreads,
                         ::testing::Values(std::make_tuple(WeightQuant::int8, GradQuant::int4),
                                           std::make_tuple(WeightQuant::fp8, GradQuant::int8)));

}  // namespace
}  // namespace zb
