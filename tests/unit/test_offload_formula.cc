// Unit tests of the offload formulas: what each mode moves to host and copies per step, by hand.
#include <gtest/gtest.h>

#include "harness/plan/offload_formula.h"
#include "harness/plan/state_formula.h"

namespace zb {
namespace {

const int64_t kDegrees[] = {1, 2, 4, 8, 64};
const Stage kSharded[] = {Stage::z2, Stage::z3, Stage::hpz};  // gradients and optimizer over n

TEST(OffloadFormula, NothingMovesWithoutOffload) {
  const OffloadPerParam r = offload_per_param(Stage::z2, Offload::none, Optimizer::adam, 2, 8, 0, 4);
  EXPECT_EQ(r.host + r.freed + r.d2h + r.h2d, 0);
  EXPECT_EQ(offload_slot_bytes_per_element(Offload::none, 2), 0);
}

TEST(OffloadFormula, ZeroOffloadCopiesFourBytesPerParameterOfTheOwnShard) {
  for (Stage st : kSharded)
    for (int64_t n : kDegrees) {
      const OffloadPerParam r = offload_per_param(st, Offload::optimizer, Optimizer::adam, 2, n, 0, 1);
      EXPECT_DOUBLE_EQ((r.d2h + r.h2d) * double(n), 4) << stage_name(st) << " " << n;
      EXPECT_DOUBLE_EQ(r.host * double(n), 2 + 12) << stage_name(st) << " " << n;
      EXPECT_DOUBLE_EQ(r.freed, r.host);
    }
}

TEST(OffloadFormula, GradientsLeaveOncePerMicroBatchAndComeBackOnce) {
  for (int m : {1, 2, 8})
    for (int g : {2, 4}) {
      const OffloadPerParam dp = offload_per_param(Stage::dp, Offload::grads, Optimizer::adam, g, 8, 0, m);
      EXPECT_DOUBLE_EQ(dp.host, g);  // dp keeps the whole gradient
      EXPECT_DOUBLE_EQ(dp.d2h, m * g);
      EXPECT_DOUBLE_EQ(dp.h2d, g);
      const OffloadPerParam z2 = offload_per_param(Stage::z2, Offload::grads, Optimizer::momentum, g, 8, 0, m);
      EXPECT_DOUBLE_EQ(z2.host, g / 8.0);
      EXPECT_DOUBLE_EQ(z2.d2h, m * g / 8.0);
      EXPECT_DOUBLE_EQ(z2.h2d, g / 8.0);
    }
}

TEST(OffloadFormula, StreamedWeightsCrossForEveryForwardAndBackward) {
  // z3: the 2/n shard streams in twice per micro-batch; the CPU updates it where it lives.
  const OffloadPerParam z3 = offload_per_param(Stage::z3, Offload::weights, Optimizer::adam, 2, 8, 0, 3);
  EXPECT_DOUBLE_EQ(z3.host, 16.0 / 8);
  EXPECT_DOUBLE_EQ(z3.h2d, 3 * 2 * 2.0 / 8);
  EXPECT_DOUBLE_EQ(z3.d2h, 3 * 2.0 / 8);
  // hpz's backward reads the node copy on the device: one pass from the host.
  const OffloadPerParam hpz = offload_per_param(Stage::hpz, Offload::weights, Optimizer::adam, 2, 8, 4, 3);
  EXPECT_DOUBLE_EQ(hpz.h2d, 3 * 2.0 / 8);
  // z2 holds every weight but updates 1/n: its shard in, the gathered whole back out.
  const OffloadPerParam z2 = offload_per_param(Stage::z2, Offload::weights, Optimizer::adam, 2, 8, 0, 1);
  EXPECT_DOUBLE_EQ(z2.host, 2 + 14.0 / 8);
  EXPECT_DOUBLE_EQ(z2.h2d, 2 * 2 + 2.0 / 8);
  EXPECT_DOUBLE_EQ(z2.d2h, 2.0 / 8 + 2);
  // hsdp shards over the node's s ranks.
  const OffloadPerParam hsdp = offload_per_param(Stage::hsdp, Offload::weights, Optimizer::adam, 2, 16, 4, 1);
  EXPECT_DOUBLE_EQ(hsdp.host, 16.0 / 4);
  EXPECT_DOUBLE_EQ(offload_slot_bytes_per_element(Offload::weights, 4), 6);
  EXPECT_DOUBLE_EQ(offload_slot_bytes_per_element(Offload::optimizer, 4), 4);
}

TEST(OffloadFormula, EveryModeMovesNoMoreThanTheStageHolds) {
  for (Stage st : all_stages())
    for (int64_t n : kDegrees)
      for (auto [name, mode] : offload_choices()) {
        const OffloadPerParam r = offload_per_param(st, mode, Optimizer::adam, 2, n, 0, 1);
        EXPECT_LE(r.host, bytes_per_param(st, Optimizer::adam, 2, n) + 1e-12) << name;
        EXPECT_EQ(std::string(offload_name(mode)), name);
      }
}

}  // namespace
}  // namespace zb
