// The predictor's pieces on synthetic data: the collective model reproduces an alpha-beta
// sweep exactly and flags extrapolation; nccl-tests' -J JSON is read into known times; the
// replay of a logged step gives hand-computed times, a faster rank waiting longer (a shared
// host: test_predict_host.cc; the kernels' rates and the recorded step:
// test_predict_inputs.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "harness/predict/coll_model.h"
#include "harness/predict/nccl_tests.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"

namespace zb {
namespace {

// A sweep of an exact alpha-beta collective: 20 us + 1 ns per byte, 1 KiB to 64 MiB.
CollModel alpha_beta(double alpha, double beta) {
  std::vector<SweepPoint> pts;
  for (double b = 1024; b <= 64 << 20; b *= 4) pts.push_back({b, alpha + beta * b});
  CollModel m;
  EXPECT_TRUE(CollModel::fit(pts, &m));
  return m;
}

TEST(CollModel, ReproducesASyntheticAlphaBetaSweepExactly) {
  const double alpha = 20e-6, beta = 1e-9;
  CollModel m = alpha_beta(alpha, beta);
  EXPECT_NEAR(m.alpha_s(), alpha, 1e-15);
  EXPECT_NEAR(m.beta_s_per_byte(), beta, 1e-21);
  for (double b : {1024.0, 3000.0, 1e6, 5e7, 64.0 * (1 << 20)}) {
    CollModel::Prediction p = m.predict(b);
    EXPECT_NEAR(p.seconds, alpha + beta * b, 1e-12 * (alpha + beta * b)) << b;
    EXPECT_FALSE(p.extrapolated) << b;
  }
  // Beyond the sweep the line goes on, flagged from twice the largest size and below the
  // smallest.
  CollModel::Prediction up = m.predict(100.0 * (1 << 20)), far = m.predict(200.0 * (1 << 20)),
                        low = m.predict(512);
  EXPECT_NEAR(up.seconds, alpha + beta * 100.0 * (1 << 20), 1e-12);
  EXPECT_FALSE(up.extrapolated);
  EXPECT_NEAR(far.seconds, alpha + beta * 200.0 * (1 << 20), 1e-12);
  EXPECT_TRUE(far.extrapolated);
  EXPECT_NEAR(low.seconds, alpha + beta * 512, 1e-15);
  EXPECT_TRUE(low.extrapolated);
}

TEST(CollModel, InterpolatesBetweenMeasuredPointsAndRejectsNothingToFit) {
  CollModel m;
  ASSERT_TRUE(CollModel::fit({{1000, 1.0}, {3000, 2.0}, {2000, 4.0}, {2000, 2.0}}, &m));
  EXPECT_DOUBLE_EQ(m.predict(2000).seconds, 3.0);  // the mean of the two at 2000
  EXPECT_DOUBLE_EQ(m.predict(1500).seconds, 2.0);
  EXPECT_DOUBLE_EQ(m.predict(2500).seconds, 2.5);
  // A falling last segment does not make larger collectives faster beyond the sweep.
  EXPECT_DOUBLE_EQ(m.predict(5000).seconds, 2.0);
  EXPECT_FALSE(CollModel::fit({}, &m));
  EXPECT_FALSE(CollModel::fit({{0, 1.0}}, &m));
  ASSERT_TRUE(CollModel::fit({{1000, 2.0}}, &m));
  EXPECT_DOUBLE_EQ(m.predict(4000).seconds, 8.0);  // one point: proportional
}

// nccl-tests 2.19's -J output, as src/util.cu writes it (version 3), for all_gather_perf on 2
// processes of 4 GPUs on two hosts: "size" the full buffer, times in microseconds, one
// in-place time "nan", one size timed three times (-N 3), once fast.
const char* kNcclTestsJson = R"({"version":3,"start_time":"2025-06-01 10:00:00","args":["./build/all_gather_perf","-b","1M","-e","4M","-f","2","-g","4","-J","ag.json"],"env":["PATH=/usr/bin"],"nccl_version":22703,"config":{"nthreads":1,"ngpus":4,"minimum_bytes":1048576,"maximum_bytes":4194304,"step_factor":2,"warmup_iters":1,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","per_iter_timing":"false","per_iter_skip":0,"parallel_init":"false","devices":[{"rank":0,"group":0,"pid":11,"hostname":"a","device":0,"device_hex":"0000:18:00","device_info":"NVIDIA H100"},{"rank":4,"group":0,"pid":12,"hostname":"b","device":0,"device_hex":"0000:18:00","device_info":"NVIDIA H100"}]},"results":[{"size":1048576,"count":32768,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":40.500000,"alg_bw":25.89,"bus_bw":22.65,"nwrong":0.000000},"in_place":{"time":38.250000,"alg_bw":27.41,"bus_bw":23.99,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},{"size":2097152,"count":65536,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":61.000000,"alg_bw":34.38,"bus_bw":30.08,"nwrong":0.000000},"in_place":{"time":"nan","alg_bw":"nan","bus_bw":"nan","nwrong":null},"actual_iterations":20,"experiment_name":""},{"size":4194304,"count":131072,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":102.000000,"alg_bw":41.12,"bus_bw":35.98,"nwrong":0.000000},"in_place":{"time":101.000000,"alg_bw":41.53,"bus_bw":36.34,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},{"size":1048576,"count":32768,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":39.000000,"alg_bw":26.89,"bus_bw":23.53,"nwrong":0.000000},"in_place":{"time":39.500000,"alg_bw":26.55,"bus_bw":23.23,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},{"size":1048576,"count":32768,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":20.000000,"alg_bw":52.43,"bus_bw":45.88,"nwrong":0.000000},"in_place":{"time":21.000000,"alg_bw":49.93,"bus_bw":43.69,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""}],"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":29.98,"okay":"unchecked"},"errors":[],"end_time":"2025-06-01 10:00:05"})";

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(NcclTests, ParsedIntoKnownTimes) {
  const std::string path = write_temp("zb_ag.json", kNcclTestsJson);
  std::vector<NcclTestsRun> runs;
  ASSERT_TRUE(read_nccl_tests(path, &runs));
  ASSERT_EQ(runs.size(), 1u);
  const NcclTestsRun& r = runs[0];
  EXPECT_EQ(r.op, Coll::all_gather);
  EXPECT_EQ(r.type, "float");
  EXPECT_EQ(r.ranks, 8);  // 2 processes x 1 thread x 4 GPUs
  EXPECT_EQ(r.nodes, 2);
  ASSERT_EQ(r.points.size(), 3u);
  // Each size: each record's faster form (in place or out of place), then the median repeat
  // (38.25 of 38.25, 39 and 20 us: neither the fastest repeat nor a slow one sets it).
  EXPECT_DOUBLE_EQ(r.points[0].bytes, 1048576);
  EXPECT_DOUBLE_EQ(r.points[0].seconds, 38.25e-6);
  EXPECT_DOUBLE_EQ(r.points[1].seconds, 61e-6);  // the in-place "nan" left out
  EXPECT_DOUBLE_EQ(r.points[2].seconds, 101e-6);
  // As a sweep: the world of 8 across 2 nodes, its hand-off the default given.
  Sweep sweep;
  ASSERT_TRUE(Sweep::load(path, 12e-6, &sweep));
  EXPECT_EQ(sweep.ranks(), 8);
  EXPECT_EQ(sweep.ranks_per_node(), 4);
  const SweepSeries* s = sweep.find(Coll::all_gather, DType::bf16, 8, Tier::inter);
  ASSERT_NE(s, nullptr);  // fp32 timed, priced by bytes for bf16
  EXPECT_EQ(s->dtype, "fp32");
  EXPECT_DOUBLE_EQ(s->model.predict(3 << 20).seconds, (61e-6 + 101e-6) / 2);
  EXPECT_DOUBLE_EQ(sweep.handoff_s(Coll::all_gather), 12e-6);
  EXPECT_TRUE(sweep.handoff_defaulted());
  // Another program's file, and a file that is not nccl-tests': one line each.
  std::string other = kNcclTestsJson;
  other.replace(other.find("all_gather_perf"), 15, "broadcast_perf");
  Status bad = read_nccl_tests(write_temp("zb_bc.json", other), &runs);
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("broadcast_perf"), std::string::npos) << bad.message();
  EXPECT_FALSE(read_nccl_tests(write_temp("zb_not.json", "{\"benchmarks\": []}"), &runs));
  // The same op twice in two files is refused, naming both.
  bad = Sweep::load(path + "," + path, 0, &sweep);
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("give one of them"), std::string::npos) << bad.message();
}

// Collective number seq takes `seconds`, whatever its size.
CollRecord coll(uint64_t count) { return CollRecord{Coll::all_reduce, count, DType::bf16}; }

// The collective of `count` elements takes `count` seconds and hands off in `handoff` more.
StepPrediction replay(const ScheduleLog& log, double handoff = 0) {
  return predict_step(
      log.ops(), [](const ScheduleOp& op) { return op.what == "backward" ? 2.0 : 1.0; },
      [handoff](const CollRecord& c) { return CollCost{double(c.count), handoff, false}; });
}

TEST(Simulate, HiddenSerialAndPartlyHidden) {
  // Two layers' backward (2 s each), each followed by its 1.5 s reduction; the optimizer
  // waits for both. The first hides behind the second backward; the second is exposed.
  ScheduleLog log;
  log.step();
  log.compute("backward", 1);
  log.issue(1, coll(1));  // 1 s
  log.compute("backward", 0);
  log.issue(2, coll(3));  // 3 s, from t=4
  log.wait(2);
  log.compute("update", 0);
  StepPrediction p = replay(log);
  EXPECT_DOUBLE_EQ(p.compute_s, 5.0);
  EXPECT_DOUBLE_EQ(p.stream_s, 4.0);
  EXPECT_DOUBLE_EQ(p.comm_s, 4.0);  // no compute: both back to back, one wait at the end
  EXPECT_DOUBLE_EQ(p.exposed_s, 3.0);  // waits from t=4 to t=7
  EXPECT_DOUBLE_EQ(p.step_s, 8.0);
  EXPECT_EQ(p.collectives, 2);

  // Serialised: each collective waited for at once; everything is exposed.
  ScheduleLog serial;
  serial.step();
  serial.compute("backward", 1);
  serial.issue(1, coll(1));
  serial.wait(1);
  serial.compute("backward", 0);
  serial.issue(2, coll(3));
  serial.wait(2);
  StepPrediction s = replay(serial);
  EXPECT_DOUBLE_EQ(s.exposed_s, 4.0);
  EXPECT_DOUBLE_EQ(s.step_s, 8.0);
}

TEST(Simulate, AWaitThatBlocksPaysTheHandOffAndOneThatFindsItDoneDoesNot) {
  // The first reduction (1 s) ends under the second backward, so its wait finds it done; the
  // second (3 s) is still running when the optimizer waits: exposed until it ends, plus 0.5 s.
  ScheduleLog log;
  log.step();
  log.compute("backward", 1);
  log.issue(1, coll(1));  // t=2 to t=3
  log.compute("backward", 0);
  log.wait(1);            // at t=4: done, nothing exposed
  log.issue(2, coll(3));  // t=4 to t=7
  log.wait(2);            // blocked from t=4 to t=7.5
  log.compute("update", 0);
  StepPrediction p = replay(log, 0.5);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3.5);
  EXPECT_DOUBLE_EQ(p.step_s, 8.5);
  // Alone, each collective is waited for while it runs: both hand-offs count, on top of the
  // stream's back-to-back 4 s, which is what a serial sweep's times add up to.
  EXPECT_DOUBLE_EQ(p.stream_s, 4.0);
  EXPECT_DOUBLE_EQ(p.comm_s, 1 + 0.5 + 3 + 0.5);
}

TEST(Simulate, AQueuedCollectiveStartsAfterTheHandOffOfTheOneAWaiterBlockedOn) {
  // z3's prefetch: the next gather is issued before waiting for this one. The blocked wait's
  // hand-off (0.5 s) holds the stream as it wakes the waiter, so the queued 2 s collective runs
  // from t=1.5, not from t=1: the host that wakes and the engine that runs the stream are one.
  ScheduleLog log;
  log.step();
  log.issue(1, coll(1));  // t=0 to t=1
  log.issue(2, coll(2));  // queued: t=1.5 to t=3.5
  log.wait(1);            // blocked until t=1.5
  log.wait(2);            // blocked until t=4
  log.compute("update", 0);
  StepPrediction p = replay(log, 0.5);
  EXPECT_DOUBLE_EQ(p.comm_s, 1 + 0.5 + 2 + 0.5);
  EXPECT_DOUBLE_EQ(p.exposed_s, 4.0);
  EXPECT_DOUBLE_EQ(p.step_s, 5.0);
  EXPECT_DOUBLE_EQ(p.stream_s, 3.0);
}

TEST(Simulate, OnlyACollectiveIssuedToAStreamIdleLongEnoughWakesLate) {
  // Woken after 0.5 s idle, a collective starts 0.25 s late.
  auto woken = [](const ScheduleOp& op) { return op.what == "backward" ? 2.0 : 1.0; };
  auto cost = [](const CollRecord& c) {
    CollCost out{double(c.count), 0, false};
    out.wake_s = 0.25, out.wake_after_s = 0.5;
    return out;
  };
  ScheduleLog log;
  log.step();
  log.compute("forward", 0);  // t=0 to t=1: the stream idle all along
  log.issue(1, coll(1));      // woken: t=1.25 to t=2.25
  log.issue(2, coll(2));      // queued behind it, not idle: t=2.25 to t=4.25
  log.wait(2);                // blocked from t=1 to t=4.25
  log.issue(3, coll(1));      // the stream idle for no time: t=4.25 to t=5.25
  log.wait(3);
  StepPrediction p = predict_step(log.ops(), woken, cost);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3.25 + 1.0);
  EXPECT_DOUBLE_EQ(p.step_s, 5.25);
  EXPECT_DOUBLE_EQ(p.stream_s, 4.0);  // waking is not the stream's work
  // With no compute, nothing is issued to a stream idle for 0.5 s: no wake-up at all.
  EXPECT_DOUBLE_EQ(p.comm_s, 4.0);
}

TEST(Simulate, TheRoundWithCommunicationAloneCostsEachCollectiveItsUnwrittenTime) {
  // A 1 s reduction whose gradients, unwritten in the round with no compute, take 1.5 s there;
  // the gather has no such time. The step with compute pays 1 s for each.
  auto cost = [](const CollRecord& c) {
    CollCost out{double(c.count), 0, false};
    if (c.op == Coll::all_reduce) out.cold_s = 1.5;
    return out;
  };
  CollRecord gather = coll(2);
  gather.op = Coll::all_gather;
  ScheduleLog log;
  log.step();
  log.compute("backward", 0);  // t=0 to t=1
  log.issue(1, coll(1));       // t=1 to t=2
  log.issue(2, gather);        // t=2 to t=4
  log.wait(1);
  log.wait(2);
  StepPrediction p = predict_step(log.ops(), [](const ScheduleOp&) { return 1.0; }, cost);
  EXPECT_DOUBLE_EQ(p.step_s, 4.0);
  EXPECT_DOUBLE_EQ(p.comm_s, 1.5 + 2.0);
}

TEST(Simulate, OnlyTheLastStepCountsAndCollectivesQueue) {
  // Step 1 leaves a 5 s gather in flight; step 2 waits for it first thing.
  ScheduleLog log;
  log.step();
  log.compute("update", 0);
  log.issue(1, coll(5));  // runs from t=1 to t=6
  log.step();             // step 2 starts at t=1
  log.issue(2, coll(1));  // queued behind the gather: t=6 to t=7
  log.wait(1);            // waits until t=6
  log.compute("forward", 0);
  log.wait(2);            // ready at 7, compute at 7: nothing more exposed
  StepPrediction p = replay(log);
  EXPECT_DOUBLE_EQ(p.exposed_s, 5.0);
  EXPECT_DOUBLE_EQ(p.stream_s, 1.0);
  EXPECT_DOUBLE_EQ(p.step_s, 6.0);
  EXPECT_EQ(p.collectives, 1);
}

TEST(Simulate, AFasterRankReachesEachWaitEarlierAndWaitsForTheLateOne) {
  // Each backward takes 2 s on the slowest rank and 0.5 s less on the fastest. A 1.5 s
  // reduction issued at t=2 ends at 3.5: the slowest rank reaches its wait at 4 and goes on;
  // the fastest, 1 s ahead, arrives at 3 and waits 0.5 s, on the wire (it was issued at 2).
  // Then it leads by 0.5 s. A 1 s gather issued at 4 blocks the slowest until 5; the fastest
  // arrives at 3.5 and waits 1.5 s, the first 0.5 s of it for the slowest rank to issue.
  ScheduleLog log;
  log.step();
  log.compute("backward", 1);
  log.issue(1, coll(6));  // in quarter seconds
  log.compute("backward", 0);
  log.wait(1);
  log.issue(2, coll(4));
  log.wait(2);
  auto two = [](const ScheduleOp&) { return 2.0; };
  auto cost = [](const CollRecord& c) { return CollCost{c.count / 4.0, 0, false}; };
  RankSkew skew{[](const ScheduleOp& op) { return op.what == "backward" ? 0.5 : 0.0; }};
  StepPrediction p = predict_step(log.ops(), two, cost, nullptr, nullptr, nullptr, &skew);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.0);
  EXPECT_DOUBLE_EQ(p.skew_wait_s, 0.5);
  EXPECT_DOUBLE_EQ(p.step_s, 5.0);  // the slowest rank's step
  // Ranks alike: only the slowest rank's 1 s wait for the gather.
  StepPrediction alike = predict_step(log.ops(), two, cost);
  EXPECT_DOUBLE_EQ(alike.exposed_s, 1.0);
  EXPECT_DOUBLE_EQ(alike.skew_wait_s, 0.0);
  EXPECT_DOUBLE_EQ(alike.step_s, 5.0);
}

}  // namespace
}  // namespace zb
