// The single-process reference splits its gradient sum over the rank's CPU threads: the state
// it ends in must not depend on how many, nor on where the chunks are cut (inside a group of 8
// elements that share a hash, or across two segments).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "harness/compute/compute.h"
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

}  // namespace
}  // namespace zb
