// Unit tests of the ZeRO formulas against the article's numbers, computed by hand.
#include <gtest/gtest.h>

#include "harness/plan/state_formula.h"

namespace zb {
namespace {

const int64_t kDegrees[] = {1, 2, 3, 4, 8, 64};

TEST(StateFormula, AdamBf16MatchesTheTable) {
  for (int64_t n : kDegrees) {
    const double nd = double(n);
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::dp, Optimizer::adam, 2, n), 16) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z1, Optimizer::adam, 2, n), 4 + 12 / nd) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z2, Optimizer::adam, 2, n), 2 + 14 / nd) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z3, Optimizer::adam, 2, n), 16 / nd) << n;
  }
  // The article's example: 8 GPUs.
  EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z1, Optimizer::adam, 2, 8), 5.5);
  EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z2, Optimizer::adam, 2, 8), 3.75);
  EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z3, Optimizer::adam, 2, 8), 2);
}

TEST(StateFormula, MomentumIsTheTwelveFamily) {
  for (int64_t n : kDegrees) {
    const double nd = double(n);
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::dp, Optimizer::momentum, 2, n), 12) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z1, Optimizer::momentum, 2, n), 4 + 8 / nd) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z2, Optimizer::momentum, 2, n), 2 + 10 / nd) << n;
    EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z3, Optimizer::momentum, 2, n), 12 / nd) << n;
  }
}

TEST(StateFormula, Fp32GradsAddTwoBytesWhereGradsAreWhole) {
  for (Optimizer opt : {Optimizer::adam, Optimizer::momentum}) {
    for (int64_t n : kDegrees) {
      const double nd = double(n);
      const double o = opt == Optimizer::adam ? 12 : 8;
      EXPECT_DOUBLE_EQ(bytes_per_param(Stage::dp, opt, 4, n), 2 + 4 + o);
      EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z1, opt, 4, n), 2 + 4 + o / nd);
      EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z2, opt, 4, n), 2 + (4 + o) / nd);
      EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z3, opt, 4, n), (2 + 4 + o) / nd);
    }
  }
  EXPECT_DOUBLE_EQ(bytes_per_param(Stage::dp, Optimizer::adam, 4, 8), 18);
  EXPECT_DOUBLE_EQ(bytes_per_param(Stage::z1, Optimizer::adam, 4, 8), 7.5);
}

TEST(StateFormula, StateBytesAndCategories) {
  StateBytes adam = state_bytes(Optimizer::adam, 2);
  EXPECT_DOUBLE_EQ(adam.weights, 2);
  EXPECT_DOUBLE_EQ(adam.grads, 2);
  EXPECT_DOUBLE_EQ(adam.optimizer, 12);
  EXPECT_DOUBLE_EQ(adam.total(), 16);
  StateBytes mom = state_bytes(Optimizer::momentum, 4);
  EXPECT_DOUBLE_EQ(mom.grads, 4);
  EXPECT_DOUBLE_EQ(mom.optimizer, 8);

  CategoryBytes dp = bytes_per_param_by_category(Stage::dp, Optimizer::adam, 2, 4);
  EXPECT_DOUBLE_EQ(dp.weights, 2);
  EXPECT_DOUBLE_EQ(dp.grads, 2);
  EXPECT_DOUBLE_EQ(dp.master, 4);
  EXPECT_DOUBLE_EQ(dp.moments, 8);
  CategoryBytes z2 = bytes_per_param_by_category(Stage::z2, Optimizer::momentum, 2, 4);
  EXPECT_DOUBLE_EQ(z2.weights, 2);
  EXPECT_DOUBLE_EQ(z2.grads, 0.5);
  EXPECT_DOUBLE_EQ(z2.master, 1);
  EXPECT_DOUBLE_EQ(z2.moments, 1);
  // The per-category split and the single number are the same formula.
  for (Stage s : all_stages())
    for (int g : {2, 4})
      for (int64_t n : kDegrees)
        EXPECT_DOUBLE_EQ(bytes_per_param_by_category(s, Optimizer::adam, g, n).total(),
                         bytes_per_param(s, Optimizer::adam, g, n));
}

TEST(StateFormula, VolumesAreTwoTwoTwoThree) {
  EXPECT_DOUBLE_EQ(volume_psi(Stage::dp), 2);
  EXPECT_DOUBLE_EQ(volume_psi(Stage::z1), 2);
  EXPECT_DOUBLE_EQ(volume_psi(Stage::z2), 2);
  EXPECT_DOUBLE_EQ(volume_psi(Stage::z3), 3);
  for (Stage s : all_stages())
    EXPECT_DOUBLE_EQ(step_traffic(s, 8, 1000, 2).elements, volume_psi(s, 8) * 1000);
}

TEST(StateFormula, StepTrafficCollectives) {
  StepTraffic dp = step_traffic(Stage::dp, 4, 100, 2);
  EXPECT_DOUBLE_EQ(dp.all_reduce_elements, 100);
  EXPECT_DOUBLE_EQ(dp.reduce_scatter_elements, 0);
  EXPECT_DOUBLE_EQ(dp.all_gather_elements, 0);
  StepTraffic z1 = step_traffic(Stage::z1, 4, 100, 2);
  EXPECT_DOUBLE_EQ(z1.reduce_scatter_elements, 100);
  EXPECT_DOUBLE_EQ(z1.all_gather_elements, 100);
  StepTraffic z3 = step_traffic(Stage::z3, 4, 100, 2);
  EXPECT_DOUBLE_EQ(z3.reduce_scatter_elements, 100);
  EXPECT_DOUBLE_EQ(z3.all_gather_elements, 200);
}

TEST(StateFormula, WireBytesPerRank) {
  // 7e9 params on 8 ranks, BF16 grads: ring sends 7/8 of each full-buffer pass.
  const double psi = 7e9;
  EXPECT_DOUBLE_EQ(step_traffic(Stage::dp, 8, psi, 2).wire_bytes, 2 * psi * 7 / 8 * 2);
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z1, 8, psi, 2).wire_bytes, 2 * psi * 7 / 8 * 2);
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z2, 8, psi, 2).wire_bytes, 2 * psi * 7 / 8 * 2);
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z3, 8, psi, 2).wire_bytes, 3 * psi * 7 / 8 * 2);
  // FP32 grads: gradient passes cost 4 bytes, weight gathers stay BF16.
  EXPECT_DOUBLE_EQ(step_traffic(Stage::dp, 4, 1000, 4).wire_bytes, 0.75 * 2 * 1000 * 4);
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z1, 4, 1000, 4).wire_bytes, 0.75 * (1000 * 4 + 1000 * 2));
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z2, 4, 1000, 4).wire_bytes, 0.75 * (1000 * 4 + 1000 * 2));
  EXPECT_DOUBLE_EQ(step_traffic(Stage::z3, 4, 1000, 4).wire_bytes, 0.75 * (1000 * 4 + 2000 * 2));
  // One rank sends nothing, whatever the volume convention says.
  for (Stage s : all_stages()) EXPECT_DOUBLE_EQ(step_traffic(s, 1, psi, 2).wire_bytes, 0);
}

// Quantized passes: bytes counted as BF16 elements (bytes / 2), blocks of 4096 with an FP32
// scale each, worked out by hand for 64 ranks in nodes of 8.
TEST(StateFormula, QuantizedPassesMoveTheirBytes) {
  const double psi = 64.0 * 4096 * 100, w8 = (1 + 4.0 / 4096) / 2, g4 = (0.5 + 4.0 / 4096) / 2;
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, 1e-12 * want); };
  // z3 + qwZ: both gathers INT8, the reduce-scatter BF16.
  StepTraffic t = step_traffic(Stage::z3, 64, psi, 2, 8, {WeightQuant::int8, GradQuant::none});
  near(t.all_gather_elements, 2 * w8 * psi);
  near(t.reduce_scatter_elements, psi);
  // FP8: half of BF16 per gather, plus every rank's FP32 amax (two BF16 elements) per unit.
  t = step_traffic(Stage::z3, 64, psi, 2, 8, {WeightQuant::fp8, GradQuant::none}, 10);
  near(t.all_gather_elements, psi + 2.0 * 64 * 10);
  // zpp: qgZ's all-to-all within the node (g4) and across nodes (1/8 of it), the INT8 forward
  // gather over all 64, the BF16 backward gather from the node copy.
  StepTraffic z = step_traffic(Stage::zpp, 64, psi, 2, 8);
  EXPECT_DOUBLE_EQ(z.reduce_scatter_elements, 0);
  near(z.all_to_all_elements, g4 * psi + g4 / 8 * psi);
  near(z.intra_elements, g4 * psi + psi);
  near(z.inter_elements, g4 / 8 * psi + w8 * psi);
  // A node sends one rank's share of the world gather, and all 8 ranks' of the cross hop.
  near(z.inter_node_bytes, w8 * psi * 63 / 64 * 2 + 8 * (g4 / 8 * psi) * 7 / 8 * 2);
  const double z3_bytes = step_traffic(Stage::z3, 64, psi, 2, 8).inter_node_bytes;
  near(z3_bytes, 3 * psi * 63 / 64 * 2);
  EXPECT_GT(z3_bytes / z.inter_node_bytes, 4.0);  // ZeRO++'s "4x less" across nodes, here 4.15
  // What a stage cannot quantize is left as it is; zpp's own quantization is not overridden.
  near(step_traffic(Stage::z2, 64, psi, 2, 8, {WeightQuant::int8, GradQuant::none}).elements,
       step_traffic(Stage::z2, 64, psi, 2, 8).elements);
  near(step_traffic(Stage::zpp, 64, psi, 2, 8, {WeightQuant::fp8, GradQuant::int8}).elements, z.elements);
  near(step_traffic(Stage::hpz, 64, psi, 2, 8, {WeightQuant::int8, GradQuant::int4}).elements, z.elements);
}

TEST(StateFormula, NamesRoundTripAndBadNamesFail) {
  for (Stage s : all_stages()) {
    Stage back = Stage::dp;
    ASSERT_TRUE(parse_stage(stage_name(s), &back).is_ok());
    EXPECT_EQ(back, s);
  }
  Stage st;
  EXPECT_FALSE(parse_stage("z4", &st).is_ok());
  EXPECT_FALSE(parse_stage("", &st).is_ok());
  for (Optimizer o : {Optimizer::adam, Optimizer::momentum}) {
    Optimizer back = Optimizer::adam;
    ASSERT_TRUE(parse_optimizer(optimizer_name(o), &back).is_ok());
    EXPECT_EQ(back, o);
  }
  Optimizer opt;
  EXPECT_FALSE(parse_optimizer("sgd", &opt).is_ok());
}

}  // namespace
}  // namespace zb
