// --explain on a crafted trace: the worst rank found, a wait's two parts joined, each op lined
// up with the predicted one in program order, and the differences summed by cause exactly.
#include <gtest/gtest.h>

#include <fstream>

#include "harness/predict/explain.h"

namespace zb {
namespace {

// Rank 1 waited longest (1.8 s): it computed 0.6 s more than predicted, its all-reduce ran
// 0.4 s longer and started 0.1 s after it was issued, rank 0 issued it 0.3 s late, and the
// wait ended 0.3 s after the collective (the model's hand-off: 0.5 s).
const char* kTrace = R"JSON({"displayTimeUnit": "ms", "zerobench": {"stage": "dp"}, "traceEvents": [
{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0", "exposed_us": 200000.000}},
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "rank 1", "exposed_us": 1800000.000}},
{"name": "forward L0", "ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 1000000, "args": {}},
{"name": "forward L0", "ph": "X", "pid": 1, "tid": 0, "ts": 0, "dur": 1200000, "args": {"layer": 0}},
{"name": "backward L0", "ph": "X", "pid": 1, "tid": 0, "ts": 1200000, "dur": 2300000, "args": {"layer": 0}},
{"name": "all_reduce 953.7 MiB (bf16)", "ph": "X", "pid": 1, "tid": 1, "ts": 3600000, "dur": 1400000, "args": {"unit": 0, "log": 12, "bytes": 1000000000, "issued_us": 3500000.000}},
{"name": "wait for the wire", "ph": "X", "pid": 1, "tid": 2, "ts": 3800000, "dur": 1500000, "args": {"awaits": 12, "part": "wire", "late_rank": 0}},
{"name": "wait for rank 0", "ph": "X", "pid": 1, "tid": 2, "ts": 3500000, "dur": 300000, "args": {"awaits": 12, "part": "skew", "late_rank": 0}},
{"name": "optimizer U0", "ph": "X", "pid": 1, "tid": 0, "ts": 5300000, "dur": 100000, "args": {"unit": 0}}
]})JSON";

TEST(Explain, LinesUpEveryOpAndSumsTheDifferencesByCause) {
  const std::string path = ::testing::TempDir() + "zb_explain_trace.json";
  std::ofstream(path) << kTrace;
  MeasuredStep m;
  ASSERT_TRUE(read_measured_step(path, -1, &m));
  EXPECT_EQ(m.rank, 1);
  EXPECT_DOUBLE_EQ(m.exposed_s, 1.8);
  ASSERT_EQ(m.compute.size(), 3u);
  EXPECT_EQ(m.compute[2].name, "optimizer U0");
  ASSERT_EQ(m.colls.size(), 1u);
  EXPECT_EQ(m.colls[0].log, 12);
  ASSERT_EQ(m.waits.size(), 1u);  // the skew part and the wire part: one wait
  EXPECT_DOUBLE_EQ(m.waits[0].start_s, 3.5);
  EXPECT_DOUBLE_EQ(m.waits[0].end_s, 5.3);
  EXPECT_NEAR(m.waits[0].skew_s, 0.3, 1e-12);
  EXPECT_EQ(m.waits[0].late_rank, 0);

  // The replay: forward 1 s, backward 2 s, the all-reduce (number 7) 1 s from t=3, waited for
  // until 4.5 (0.5 s hand-off), the update.
  using K = ScheduleOp::Kind;
  const std::vector<OpTiming> predicted = {{K::compute, "forward", 0, 0, 0, 0, 1},
                                           {K::compute, "backward", 0, 0, 1, 1, 3},
                                           {K::issue, "", -1, 7, 3, 3, 4, 1e9},
                                           {K::wait, "", -1, 7, 3, 3, 4.5},
                                           {K::compute, "update", 0, 0, 4.5, 4.5, 4.5}};
  const Explanation x = explain(predicted, m, 0.5);
  EXPECT_NEAR(x.exposed_measured_s, 1.8, 1e-12);
  EXPECT_NEAR(x.exposed_predicted_s, 1.5, 1e-12);
  EXPECT_NEAR(x.compute_s, 0.6, 1e-12);
  EXPECT_NEAR(x.collective_s, 0.4, 1e-12);
  EXPECT_NEAR(x.late_start_s, 0.1, 1e-12);
  EXPECT_NEAR(x.skew_s, 0.3, 1e-12);
  EXPECT_NEAR(x.handoff_s, -0.2, 1e-12);
  // The three largest, in order.
  const size_t compute = x.causes.find("600.000 ms compute"), coll = x.causes.find("400.000 ms collectives longer"),
               skew = x.causes.find("300.000 ms waits for a late rank");
  ASSERT_NE(compute, std::string::npos) << x.causes;
  ASSERT_NE(coll, std::string::npos) << x.causes;
  ASSERT_NE(skew, std::string::npos) << x.causes;
  EXPECT_LT(compute, coll);
  EXPECT_LT(coll, skew);
  EXPECT_EQ(x.causes.find("hand-off"), std::string::npos);  // fourth: not named
  // The collectives' part, by op: the one all-reduce took 1.4 s where 1 s was priced.
  EXPECT_NE(x.causes.find("sweep's times (all_reduce 400.000 ms over 1 at 1.40x)"), std::string::npos) << x.causes;

  // A replay whose faster rank waited 1.7 s, 0.2 s of it for the late one: that rank's exposed
  // time is the prediction, and only the measured skew beyond 0.2 s is left to explain.
  StepPrediction whole;
  whole.exposed_s = 1.7, whole.skew_wait_s = 0.2;
  const Explanation skewed = explain(predicted, m, 0.5, &whole);
  EXPECT_NEAR(skewed.exposed_predicted_s, 1.7, 1e-12);
  EXPECT_NEAR(skewed.skew_s, 0.1, 1e-12);
  EXPECT_NEAR(skewed.compute_s, 0.6, 1e-12);
}

TEST(Explain, ReadsWhichRoundTheTraceDrew) {
  // zb_zero --trace-round=comm names the round in the trace's zerobench block; a trace that
  // names none, or "step", drew the whole step.
  const std::string path = ::testing::TempDir() + "zb_explain_round.json";
  const std::string trace = kTrace, stage = R"("stage": "dp")";
  const size_t at = trace.find(stage);
  ASSERT_NE(at, std::string::npos);
  for (const auto& [round, comm_only] : std::vector<std::pair<std::string, bool>>{
           {"", false}, {R"(, "round": "step")", false}, {R"(, "round": "comm")", true}}) {
    std::string text = trace;
    text.insert(at + stage.size(), round);
    std::ofstream(path) << text;
    MeasuredStep m;
    ASSERT_TRUE(read_measured_step(path, -1, &m)) << round;
    EXPECT_EQ(m.comm_only, comm_only) << round;
    EXPECT_EQ(m.colls.size(), 1u) << round;
  }
}

TEST(Explain, SplitsAnOpsDifferenceByPlacement) {
  // Two gathers of one size, each priced at 0.1 s: the in-place one took 0.2 s, the other 0.1 s.
  // Summed over the op they would read as one gather 0.1 s over at 1.5x; apart, the in-place
  // form carries all of it. A trace without the placement reads as out of place.
  const char* trace = R"JSON({"traceEvents": [
{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0", "exposed_us": 0}},
{"name": "all_gather 976.6 KiB (bf16)", "ph": "X", "pid": 0, "tid": 1, "ts": 0, "dur": 200000, "args": {"log": 3, "bytes": 1000000, "in_place": true, "issued_us": 0}},
{"name": "all_gather 976.6 KiB (bf16)", "ph": "X", "pid": 0, "tid": 1, "ts": 200000, "dur": 100000, "args": {"log": 4, "bytes": 1000000, "issued_us": 200000}}
]})JSON";
  const std::string path = ::testing::TempDir() + "zb_explain_placement.json";
  std::ofstream(path) << trace;
  MeasuredStep m;
  ASSERT_TRUE(read_measured_step(path, -1, &m));
  ASSERT_EQ(m.colls.size(), 2u);
  EXPECT_TRUE(m.colls[0].in_place);
  EXPECT_FALSE(m.colls[1].in_place);
  using K = ScheduleOp::Kind;
  const std::vector<OpTiming> predicted = {{K::issue, "", -1, 1, 0, 0, 0.1, 1e6}, {K::issue, "", -1, 2, 0, 0.1, 0.2, 1e6}};
  const Explanation x = explain(predicted, m, 0);
  EXPECT_NEAR(x.collective_s, 0.1, 1e-12);
  EXPECT_NE(x.causes.find("(all_gather in place 100.000 ms over 1 at 2.00x, all_gather 0.000 ms over 1 at 1.00x)"),
            std::string::npos)
      << x.causes;
}

}  // namespace
}  // namespace zb
