// Unit tests of pipeline ZeRO: the formulas (volumes 2, 2 and M + 1, ring wire bytes, and the
// gradient memory of the accumulation buffer against the shard and its two slots), then the
// schedules (Megatron's orders written out by hand, the invariants every order keeps, and the
// idle slots of a small pipeline replayed on paper).
#include <gtest/gtest.h>

#include <string>

#include "harness/pipeline/pipeline_schedule.h"
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

std::string text(const std::vector<PipeOp>& order) {
  std::string out;
  for (const PipeOp& op : order)
    out += std::string(out.empty() ? "" : " ") + (op.forward ? "F" : "B") + std::to_string(op.microbatch) +
           (op.chunk ? "c" + std::to_string(op.chunk) : "");
  return out;
}

TEST(PipelineSchedule, InterleavedTableIsMegatrons) {
  // Megatron's own example: PP 2, 5 micro-batches in groups of 3, 2 chunks.
  const auto t = interleaved_table(5, 2, 3);
  std::string mbs, chunks;
  for (auto [mb, c] : t) mbs += std::to_string(mb), chunks += std::to_string(c);
  EXPECT_EQ(mbs, "0120123434");
  EXPECT_EQ(chunks, "0001110011");
}

TEST(PipelineSchedule, OneF1BWarmsUpByTheRanksAfterIt) {
  EXPECT_EQ(text(pipeline_order({6, 1, 4, 0})), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(text(pipeline_order({6, 1, 4, 2})), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(text(pipeline_order({6, 1, 4, 3})), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(text(pipeline_order({2, 1, 4, 0})), "F0 F1 B0 B1");  // fewer micro-batches than warm-up
}

TEST(PipelineSchedule, InterleavedOrderByHand) {
  // P = 2, C = 2, M = 4, rank 0: 2 (P - 1) + (C - 1) P = 4 warm-up forwards; backwards run
  // the chunks in reverse.
  EXPECT_EQ(text(pipeline_order({4, 2, 2, 0})),
            "F0 F1 F0c1 F1c1 F2 B0c1 F3 B1c1 F2c1 B0 F3c1 B1 B2c1 B3c1 B2 B3");
  // Rank 1 warms up with 2, then alternates through the same table.
  EXPECT_EQ(text(pipeline_order({4, 2, 2, 1})),
            "F0 F1 F0c1 B0c1 F1c1 B1c1 F2 B0 F3 B1 F2c1 B2c1 F3c1 B3c1 B2 B3");
}

TEST(PipelineSchedule, EveryOrderRunsEachOpOnceInMicrobatchOrder) {
  for (int P : {1, 2, 3, 4})
    for (int C : {1, 2, 3})
      for (int M : {1, 2, 3, 4, 6, 8, 12}) {
        PipelineShape s{M, C, P, 0};
        if (!check_pipeline(s)) {
          continue;
        }
        for (s.rank = 0; s.rank < P; ++s.rank) {
          const auto order = pipeline_order(s);
          ASSERT_EQ(order.size(), size_t(2 * M * C));
          std::vector<int> next_f(size_t(C), 0), next_b(size_t(C), 0);
          for (const PipeOp& op : order) {
            auto& next = op.forward ? next_f : next_b;
            ASSERT_EQ(op.microbatch, next[size_t(op.chunk)]++) << text(order);
            if (!op.forward) {
              ASSERT_LT(op.microbatch, next_f[size_t(op.chunk)]) << text(order);
            }
          }
          EXPECT_FALSE(order.back().forward);
          std::vector<double> idle;
          ASSERT_TRUE(pipeline_idle(s, std::vector<double>(size_t(P * C), 1.0),
                                    std::vector<double>(size_t(P * C), 2.0), &idle))
              << P << " " << C << " " << M;
          for (double x : idle) EXPECT_GE(x, 0);
          if (P == 1) {
            for (double x : idle) EXPECT_EQ(x, 0);
          }
        }
      }
}

TEST(PipelineSchedule, IdleSlotsOfATwoStagePipelineByHand) {
  // Forward 1 s, backward 2 s. Rank 1: F0 waits for rank 0's F0 (idle 1), then B0 [2, 4],
  // F1 [4, 5], B1 [5, 7]. Rank 0: F0 [0, 1], F1 [1, 2], B0 waits for rank 1's B0 (idle 2)
  // [4, 6], B1 waits for rank 1's B1 (idle 1) [7, 9].
  std::vector<double> idle;
  ASSERT_TRUE(pipeline_idle({2, 1, 2, 0}, {1, 1}, {2, 2}, &idle));
  EXPECT_EQ(idle, (std::vector<double>{0, 0, 2, 1}));
  ASSERT_TRUE(pipeline_idle({2, 1, 2, 1}, {1, 1}, {2, 2}, &idle));
  EXPECT_EQ(idle, (std::vector<double>{1, 0, 0, 0}));
}

TEST(PipelineSchedule, ChecksAndLayerSplit) {
  EXPECT_TRUE(check_pipeline({5, 3, 1, 0}));  // one pipeline rank: any M
  EXPECT_TRUE(check_pipeline({5, 1, 4, 3}));  // plain 1F1B: any M
  EXPECT_FALSE(check_pipeline({5, 2, 2, 0}));  // interleaved: M a multiple of P
  EXPECT_FALSE(check_pipeline({4, 2, 2, 2}));  // rank out of range
  EXPECT_FALSE(check_pipeline({0, 1, 1, 0}));
  EXPECT_EQ(split_layers(7, 3), (std::vector<std::pair<int, int>>{{0, 3}, {3, 5}, {5, 7}}));
}

}  // namespace
}  // namespace zb
