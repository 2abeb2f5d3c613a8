// The replay on a shared host, on hand-computed steps: compute that keeps the cores busy slows
// the stream (a fair share each, the ranks' busy spells apart where one rank runs ahead);
// where a node's CPU ranks outnumber its cores the stream moves on the cores none of them
// computes on, and they leave a blocking wait in waves; and a reduction that waits in the
// stream's queue meets its gradients as cold as the spread sweep's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/core/stats.h"
#include "harness/predict/replay.h"
#include "harness/predict/simulate.h"

namespace zb {
namespace {

CollRecord coll(uint64_t count) { return CollRecord{Coll::all_reduce, count, DType::bf16}; }

// Two backwards of 2 s, each ending in 1 s of compute that keeps the host busy, a 3 s
// reduction issued after the first, and the optimizer's wait for it.
ScheduleLog reduction_under_two_backwards() {
  ScheduleLog log;
  log.step();
  log.compute("backward", 1);
  log.issue(1, coll(3));
  log.compute("backward", 0);
  log.wait(1);
  return log;
}

HostShare busy_last_second(double stream_rate, double skewed_rate = 1) {
  return {[](const ScheduleOp& op) { return op.what == "backward" ? 1.0 : 0.0; }, stream_rate, skewed_rate};
}

// Every compute op 2 s; a collective of `count` elements takes `count` seconds, and `cold`
// times that where it meets its gradients cold (CollCost::cold_s; NaN: never).
StepPrediction replay_on_host(const ScheduleLog& log, const HostShare* host, const RankSkew* skew = nullptr,
                              std::vector<OpTiming>* timeline = nullptr, double cold = NAN) {
  return predict_step(
      log.ops(), [](const ScheduleOp&) { return 2.0; },
      [cold](const CollRecord& c) {
        CollCost k{double(c.count), 0, false};
        k.cold_s = cold * double(c.count);
        return k;
      },
      nullptr, timeline, host, skew);
}

TEST(Simulate, ComputeThatKeepsASharedHostBusySlowsTheStream) {
  // The reduction runs 1 s under the second backward's sleep; while the host computes it runs
  // at the rate given; then the optimizer's wait blocks until it ends.
  const ScheduleLog log = reduction_under_two_backwards();
  auto run = [&](double rate, std::vector<OpTiming>* timeline) {
    const HostShare host = busy_last_second(rate);
    return replay_on_host(log, &host, nullptr, timeline);
  };
  std::vector<OpTiming> timeline;
  StepPrediction stopped = run(0, &timeline);
  EXPECT_DOUBLE_EQ(stopped.exposed_s, 2.0);  // 2 s of it left at t=4: blocked until t=6
  EXPECT_DOUBLE_EQ(stopped.step_s, 6.0);
  EXPECT_DOUBLE_EQ(stopped.stream_s, 3.0);  // its swept time: the pause is not its work
  EXPECT_DOUBLE_EQ(stopped.comm_s, 3.0);    // no compute, nothing to share the host with
  ASSERT_EQ(timeline.size(), 4u);
  EXPECT_EQ(timeline[1].kind, ScheduleOp::Kind::issue);
  EXPECT_DOUBLE_EQ(timeline[1].start_s, 2.0);
  EXPECT_DOUBLE_EQ(timeline[1].end_s, 6.0);
  // At half speed the busy second does half a second's work: 1.5 s left at t=4.
  EXPECT_DOUBLE_EQ(run(0.5, nullptr).exposed_s, 1.5);
  // At full speed the host is not shared: as without it, 2 to 5.
  EXPECT_DOUBLE_EQ(run(1, nullptr).exposed_s, 1.0);
  EXPECT_DOUBLE_EQ(replay_on_host(log, nullptr).exposed_s, 1.0);
}

TEST(Simulate, OnASharedHostTheRanksBusySpellsTogetherPauseTheStreamLonger) {
  // The host-share case above (a 3 s reduction, 1 s of host compute at the end of each 2 s
  // backward, the stream stopped meanwhile), with the fastest rank 0.25 s ahead after the
  // first backward: its busy spell starts 0.25 s before the slowest's, so the stream (stopped
  // while any rank computes) runs only from 2 to 2.75 and has 2.25 s left at t=4, until 6.25.
  // The fastest rank, 0.5 s ahead by then, waits from 3.5.
  const ScheduleLog log = reduction_under_two_backwards();
  RankSkew skew{[](const ScheduleOp& op) { return op.what == "backward" ? 0.25 : 0.0; }};
  HostShare host = busy_last_second(0, 0);
  StepPrediction p = replay_on_host(log, &host, &skew);
  EXPECT_DOUBLE_EQ(p.step_s, 6.25);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.75);
  EXPECT_DOUBLE_EQ(p.skew_wait_s, 0.0);  // issued at 2, before either rank waited
  // Where one rank's spell runs alone the stream goes at half speed: from 2.75 to 3 (the
  // fastest alone) and 3.75 to 4 (the slowest alone) it does 0.25 s of work, stopping only
  // from 3 to 3.75 where both compute. 2 s are left at t=4, until 6.
  host = busy_last_second(0, 0.5);
  p = replay_on_host(log, &host, &skew);
  EXPECT_DOUBLE_EQ(p.step_s, 6.0);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.5);
}

TEST(Simulate, TheStreamSlowsOnlyWhereTheRanksThreadsOutnumberTheCores) {
  // Each rank's communication thread shares the cores with the busy compute threads, a fair
  // share each: cores / (busy compute threads + communication threads), at most 1.
  EXPECT_DOUBLE_EQ(busy_stream_rate(2, 2), 0.5);    // 4 threads on 2 cores
  EXPECT_DOUBLE_EQ(busy_stream_rate(2, 4), 0.25);   // oversubscribed: 8 threads on 2 cores
  EXPECT_DOUBLE_EQ(busy_stream_rate(6, 4), 0.75);   // 8 threads on 6 cores
  EXPECT_DOUBLE_EQ(busy_stream_rate(96, 8), 1.0);   // a core each and more
  EXPECT_DOUBLE_EQ(busy_stream_rate(0, 8), 1.0);    // on devices the host is not shared
  // With only some ranks computing: 1 of 2 leaves 3 threads on 2 cores.
  EXPECT_DOUBLE_EQ(busy_stream_rate(2, 2, 1), 2.0 / 3);
  EXPECT_DOUBLE_EQ(busy_stream_rate(2, 4, 2), 2.0 / 6);
  EXPECT_DOUBLE_EQ(busy_stream_rate(6, 4, 2), 1.0);
}

// The binomial mean both crowded-host models take (stats.h): the count's mean n p and its
// second moment n p (1 - p) + (n p)^2, and the certain ends.
TEST(Stats, BinomialMeanOfACountAndItsSquare) {
  EXPECT_NEAR(binomial_mean(4, 0.25, [](int k) { return double(k); }), 1.0, 1e-12);
  EXPECT_NEAR(binomial_mean(4, 0.25, [](int k) { return double(k * k); }), 0.75 + 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(binomial_mean(4, 0.0, [](int k) { return k + 7.0; }), 7.0);
  EXPECT_DOUBLE_EQ(binomial_mean(4, 1.0, [](int k) { return k + 7.0; }), 11.0);
  EXPECT_DOUBLE_EQ(binomial_mean(0, 0.5, [](int k) { return k + 7.0; }), 7.0);
}

TEST(Simulate, WhereRanksOutnumberTheCoresTheStreamMovesOnTheCoresNoneComputesOn) {
  // The host-share case above. Two ranks on one core, each busy half the op at its own time:
  // the stream moves only while neither computes, at (1 - 1/2)^2 of its speed through all of
  // the second backward, 0.5 s of work by t=4; 2.5 s left, until 6.5.
  const ScheduleLog log = reduction_under_two_backwards();
  HostShare host = busy_last_second(0.5);
  host.outnumbered_ranks = 2, host.outnumbered_cores = 1;
  StepPrediction p = replay_on_host(log, &host);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.5);
  EXPECT_DOUBLE_EQ(p.step_s, 6.5);
  EXPECT_DOUBLE_EQ(p.comm_s, 3.0);  // no compute: nothing to wait for
  host.outnumbered_ranks = 3;       // (1/2)^3: 0.25 s of work by t=4
  EXPECT_DOUBLE_EQ(replay_on_host(log, &host).exposed_s, 2.75);
  // Four ranks on two cores: with none busy (1/16) it has both cores, with one (4/16) half of
  // them, so 3/16 of its speed: 0.375 s of work by t=4, 2.625 s left.
  host.outnumbered_ranks = 4, host.outnumbered_cores = 2;
  EXPECT_DOUBLE_EQ(replay_on_host(log, &host).exposed_s, 2.625);
  // host_share marks a node crowded only where its ranks outnumber its cores.
  EXPECT_EQ(host_share(2, 4).outnumbered_ranks, 4);
  EXPECT_EQ(host_share(2, 4).outnumbered_cores, 2);
  EXPECT_EQ(host_share(2, 2).outnumbered_ranks, 0);
  EXPECT_EQ(host_share(0, 8).outnumbered_ranks, 0);  // devices: the host is not shared
  EXPECT_TRUE(ranks_outnumber_cores(2, 3));
  EXPECT_FALSE(ranks_outnumber_cores(2, 2));
  EXPECT_FALSE(ranks_outnumber_cores(0, 8));
}

TEST(Simulate, RanksThatOutnumberTheCoresLeaveABlockingWaitInWaves) {
  // The same step, then two updates that keep the cores busy from their start (2 s each). The
  // first two of four ranks on two cores leave the wait at 6.625 (above) and run them; the
  // replay's rank, the last, finishes the reduction only after them, 4 s later, and its updates
  // follow.
  auto step = [](bool sleep_between) {
    ScheduleLog log = reduction_under_two_backwards();
    log.wait(1);  // a second wait for what is done (the optimizer synchronizes) goes on
    if (sleep_between) log.compute("forward", 0);
    log.kernel("update", 0, "adam", 1);
    log.kernel("update", 1, "adam", 1);
    return log;
  };
  HostShare host = busy_last_second(0.5);
  host.busy_seconds = [](const ScheduleOp& op) {
    return op.what == "backward" ? 1.0 : op.what == "update" ? 2.0 : 0.0;
  };
  host.outnumbered_ranks = 4, host.outnumbered_cores = 2;
  StepPrediction p = replay_on_host(step(false), &host);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.625 + 4);
  EXPECT_DOUBLE_EQ(p.step_s, 6.625 + 4 + 4);
  EXPECT_DOUBLE_EQ(p.comm_s, 3.0);  // no compute: no spell to wait out
  // Five ranks: the last leaves after two waves. A compute op that sleeps first frees the
  // cores at once: no wave to wait for.
  host.outnumbered_ranks = 5;
  const double rate5 = std::pow(0.5, 5) + 5 * std::pow(0.5, 5) / 2;  // none busy; one of five
  const double left5 = 3 - 2 * rate5;
  EXPECT_DOUBLE_EQ(replay_on_host(step(false), &host).exposed_s, left5 + 8);
  EXPECT_DOUBLE_EQ(replay_on_host(step(true), &host).exposed_s, left5);
  // Where the cores suffice, every rank leaves at once.
  host.outnumbered_ranks = 0;
  host.stream_rate = 1;
  EXPECT_DOUBLE_EQ(replay_on_host(step(false), &host).exposed_s, 1.0);
}

TEST(Simulate, AReductionQueuedBehindAnotherMeetsItsGradientsColdByTheBytesBetween) {
  // Two reductions issued together after a 2 s backward, each 1.5 times as long cold; the
  // optimizer waits for the second.
  auto two = [](uint64_t first, uint64_t second) {
    ScheduleLog log;
    log.step();
    log.compute("backward", 0);
    log.issue(1, coll(first));
    log.issue(2, coll(second));
    log.wait(2);
    return log;
  };
  // The first (1 s) starts at once and finds its gradients as the backward left them. The
  // second (2 s) starts at 3, after half its bytes passed through the caches: half cold,
  // 2 + 0.5 * (3 - 2) = 2.5 s, until 5.5.
  StepPrediction p = replay_on_host(two(1, 2), nullptr, nullptr, nullptr, 1.5);
  EXPECT_DOUBLE_EQ(p.step_s, 5.5);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3.5);
  EXPECT_DOUBLE_EQ(p.stream_s, 3.5);  // the cold half second is the stream's work too
  EXPECT_DOUBLE_EQ(p.comm_s, 4.5);    // the round with no backward: both cold, 1.5 + 3
  // The larger first: the smaller waits behind twice its bytes, wholly cold (1.5 s), 4 to 5.5.
  EXPECT_DOUBLE_EQ(replay_on_host(two(2, 1), nullptr, nullptr, nullptr, 1.5).step_s, 5.5);
  // Where the sweep was not spread there is no cold time: 1 + 2 s, until 5.
  EXPECT_DOUBLE_EQ(replay_on_host(two(1, 2), nullptr).step_s, 5.0);
}

}  // namespace
}  // namespace zb
