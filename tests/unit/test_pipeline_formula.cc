// Unit tests of the pipeline ZeRO formulas: volumes 2, 2 and M + 1, ring wire bytes, and the
// gradient memory of the accumulation buffer against the shard and its two slots.
#include <gtest/gtest.h>

#include "harness/plan/pipeline_formula.h"

namespace zb {
namespace {

TEST(PipelineFormula, StrategiesAreTheStagesWithWholeWeights) {
  EXPECT_EQ(pipeline_stages(), (std::vector<Stage>{Stage::dp, Stage::z1, Stage::z2}));
  EXPECT_FALSE(is_pipeline_stage(Stage::z3));
}

TEST(PipelineFormula, VolumeIsTwoTwoAndMPlusOne) {
  const double psi = 1e6;
  for (int M : {1, 2, 3, 8, 32}) {
    EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::dp, 4, psi, 2, M).elements, 2 * psi);
    EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z1, 4, psi, 2, M).elements, 2 * psi);
    EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z2, 4, psi, 2, M).elements, (M + 1) * psi);
    EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z2, 4, psi, 2, M).reduce_scatter_elements, M * psi);
  }
  // Ring bytes at N = 4 with FP32 gradients: 3/4 of each pass; weights gathered in BF16.
  EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::dp, 4, psi, 4, 8).wire_bytes, 0.75 * 2 * psi * 4);
  EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z1, 4, psi, 4, 8).wire_bytes, 0.75 * (psi * 4 + psi * 2));
  EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z2, 4, psi, 4, 8).wire_bytes, 0.75 * (8 * psi * 4 + psi * 2));
  EXPECT_DOUBLE_EQ(pipeline_traffic(Stage::z2, 1, psi, 2, 8).wire_bytes, 0);
}

TEST(PipelineFormula, GradientMemoryIsTheBufferOrTheShardAndTwoSlots) {
  EXPECT_EQ(reduce_passes(Stage::z1, 8), 1);
  EXPECT_EQ(reduce_passes(Stage::z2, 8), 8);
  EXPECT_EQ(gradient_slots(Stage::dp), 0);
  EXPECT_EQ(gradient_slots(Stage::z2), 2);
  EXPECT_DOUBLE_EQ(pipeline_grad_bytes_per_param(Stage::dp, 2, 8, 0, 1e6), 2);
  EXPECT_DOUBLE_EQ(pipeline_grad_bytes_per_param(Stage::z1, 4, 8, 0, 1e6), 4);
  // A quarter of the stage per slot: g/N + 2 g / 4.
  EXPECT_DOUBLE_EQ(pipeline_grad_bytes_per_param(Stage::z2, 2, 8, 0.25e6, 1e6), 2.0 / 8 + 1.0);
}

}  // namespace
}  // namespace zb
