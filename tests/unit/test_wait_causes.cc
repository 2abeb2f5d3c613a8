// Exposed communication by cause, on crafted waits and issue times: each wait split at the
// moment its collective's last rank issued it, each step's worst rank taken, medians over
// steps, the rank most often late; clock offsets from timing rounds; the spans a trace gets;
// and sleep-for against the schedule-keeping sleep in the compute flag.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/driver/wait_causes.h"
#include "harness/stage/layer_compute.h"

namespace zb {
namespace {

TEST(SplitWait, BeforeTheLastIssueIsSkewAfterItTheWire) {
  const WaitRecord w{10.0, 14.0, 3};
  WaitSplit s = split_wait(w, 11.5);  // the last rank issued 1.5 s into the wait
  EXPECT_DOUBLE_EQ(s.skew_s, 1.5);
  EXPECT_DOUBLE_EQ(s.wire_s, 2.5);
  s = split_wait(w, 9.0);  // issued by everyone before the wait began: all wire
  EXPECT_DOUBLE_EQ(s.skew_s, 0);
  EXPECT_DOUBLE_EQ(s.wire_s, 4);
  s = split_wait(w, 20.0);  // never more skew than the wait itself
  EXPECT_DOUBLE_EQ(s.skew_s, 4);
  EXPECT_DOUBLE_EQ(s.wire_s, 0);
}

TEST(SplitWait, OfTheWireTheTimeAfterAnotherRankHadFinished) {
  const WaitRecord w{10.0, 14.0, 3};
  WaitSplit s = split_wait(w, 11.5, 0.75);  // it ended here 0.75 s after the first rank's end
  EXPECT_DOUBLE_EQ(s.skew_s, 1.5);
  EXPECT_DOUBLE_EQ(s.wire_s, 2.5);
  EXPECT_DOUBLE_EQ(s.late_finish_s, 0.75);
  s = split_wait(w, 11.5, 3.0);  // never more than the wire part
  EXPECT_DOUBLE_EQ(s.late_finish_s, 2.5);
  s = split_wait(w, 11.5);  // first to finish, or not known
  EXPECT_DOUBLE_EQ(s.late_finish_s, 0);
}

TEST(ExposedByCause, TheLateFinishOfTheWorstRankPerStep) {
  // Entry 0 ended here 0.25 s after the first rank's end, entry 1 0.5 s after: the step's waits
  // add them, each within its own wire part (entry 1's is 0.25 s).
  LastIssue last{{0.0, 5.0}, {1, 2}, {0.25, 0.5}};
  const StepCause c = step_cause({{1, 2, 0}, {4, 5.25, 1}}, last);
  EXPECT_DOUBLE_EQ(c.skew_s, 1);
  EXPECT_DOUBLE_EQ(c.wire_s, 1 + 0.25);
  EXPECT_DOUBLE_EQ(c.late_finish_s, 0.25 + 0.25);
  // The worst rank's, per step, then the median: 2, 0 and 1.
  const std::vector<std::vector<StepCause>> steps = {
      {{3, 1, 2, 1, 2}, {1, 0, 1, -1, 1}},
      {{1, 0, 1, -1, 1}, {2, 2, 0, 0, 0}},
      {{4, 3, 1, 0, 1}, {2, 0, 2, -1, 2}},
  };
  EXPECT_DOUBLE_EQ(exposed_by_cause(steps).late_finish_s, 1);
  EXPECT_TRUE(std::isnan(exposed_by_cause({}).late_finish_s));
}

TEST(ExposedByCause, WorstRankPerStepMediansAndTheRankMostOftenLate) {
  // Entries 0..2 of the log: when their last rank issued them, and which rank that was.
  LastIssue last{{0.2, 5.0, 9.0}, {1, 2, 1}, {}};
  // Rank 0 waits for entry 1 from 4 to 7 (1 s skew: rank 2 issued at 5), and for entry 2 from
  // 8.5 to 9.5 (0.5 s skew, rank 1); entry 0 was issued before its wait: all wire.
  const StepCause c = step_cause({{0.5, 1.5, 0}, {4, 7, 1}, {8.5, 9.5, 2}, {9.6, 9.7, -1}}, last);
  EXPECT_DOUBLE_EQ(c.exposed_s, 1 + 3 + 1 + 0.1);
  EXPECT_DOUBLE_EQ(c.skew_s, 0.5 + 1);
  EXPECT_NEAR(c.wire_s, 1 + 2 + 0.5 + 0.1, 1e-12);
  EXPECT_EQ(c.late_rank, 2);  // the largest skew part's
  // Three steps of three ranks: each step's worst rank by exposed time.
  const std::vector<std::vector<StepCause>> steps = {
      {{3, 1, 2, 1}, {5, 4, 1, 2}, {1, 0, 1, -1}},   // rank 1 worst: skew 4, wire 1, late 2
      {{6, 1, 5, 2}, {2, 2, 0, 0}, {0, 0, 0, -1}},   // rank 0: skew 1, wire 5, late 2
      {{1, 0, 1, -1}, {2, 0, 2, -1}, {4, 3, 1, 0}},  // rank 2: skew 3, wire 1, late 0
  };
  const ExposedByCause e = exposed_by_cause(steps);
  EXPECT_DOUBLE_EQ(e.skew_s, 3);  // median of 4, 1, 3
  EXPECT_DOUBLE_EQ(e.wire_s, 1);  // median of 1, 5, 1
  EXPECT_EQ(e.late_rank, 2);      // late in two steps of three
  // No steps: nothing known.
  const ExposedByCause none = exposed_by_cause({});
  EXPECT_TRUE(std::isnan(none.skew_s));
  EXPECT_EQ(none.late_rank, -1);
}

TEST(ClockOffset, WhereTheRoundsBoundsMeet) {
  // Rank 0's clock runs 100 s ahead. Each round was answered at some true moment A inside both
  // ranks' windows.
  const double off = 100;
  std::vector<ClockRound> rounds = {
      {off + 0.0, off + 3.0, 2.0, 2.5},    // bound [off - 2.5, off + 1.0]
      {off + 10.0, off + 10.5, 9.0, 12.0},  // bound [off - 2.0, off + 1.5]
      {off + 20.2, off + 20.6, 20.0, 20.9},  // bound [off - 0.7, off + 0.6]
  };
  double unc = 0;
  EXPECT_NEAR(clock_offset_from(rounds, &unc), off - 0.05, 1e-9);
  EXPECT_NEAR(unc, 0.65, 1e-9);
  // Bounds that do not meet (a drifting clock): the median of the midpoints, the widest half.
  rounds = {{0, 1, 0, 1}, {10, 11, 0, 1}, {20, 21, 0, 1}};  // midpoints 0, 10, 20
  EXPECT_DOUBLE_EQ(clock_offset_from(rounds, &unc), 10);
  EXPECT_DOUBLE_EQ(unc, 1);
}

TEST(SplitWaitSpans, ATracedWaitBecomesItsTwoParts) {
  LastIssue last{{2.0}, {1}, {}};
  std::vector<TraceSpan> spans = {{"forward L0", Track::compute, 0, 1, ""}, {"wait", Track::wait, 1, 4, ""}};
  split_wait_spans({{1, 4, 0}, {5, 6, -1}}, last, &spans);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].name, "forward L0");
  EXPECT_EQ(spans[1].name, "wait for rank 1");
  EXPECT_DOUBLE_EQ(spans[1].start_s, 1);
  EXPECT_DOUBLE_EQ(spans[1].end_s, 2);
  EXPECT_EQ(spans[1].args, "\"awaits\": 0, \"part\": \"skew\", \"late_rank\": 1");
  EXPECT_EQ(spans[2].name, "wait for the wire");
  EXPECT_DOUBLE_EQ(spans[2].start_s, 2);
  EXPECT_DOUBLE_EQ(spans[2].end_s, 4);
  EXPECT_EQ(spans[3].args, "\"part\": \"wire\", \"late_rank\": -1");  // awaited nothing known
}

TEST(ComputeSpec, SleepKeepsToTheScheduleAndSleepForSleepsADuration) {
  ComputeSpec s;
  ASSERT_TRUE(parse_compute_spec("sleep:500", &s));
  EXPECT_EQ(s.kind, ComputeSpec::Kind::sleep);
  EXPECT_TRUE(s.keep_schedule);
  EXPECT_DOUBLE_EQ(s.seconds, 500e-6);
  ASSERT_TRUE(parse_compute_spec("sleep-for:250", &s));
  EXPECT_EQ(s.kind, ComputeSpec::Kind::sleep);
  EXPECT_FALSE(s.keep_schedule);
  EXPECT_EQ(s.text, "sleep-for:250");
  EXPECT_FALSE(parse_compute_spec("sleep-for:x", &s));
  EXPECT_FALSE(parse_compute_spec("nap:5", &s));
}

}  // namespace
}  // namespace zb
