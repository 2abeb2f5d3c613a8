// The replay on a crowded host, on hand-computed steps: where a node's CPU ranks outnumber its
// cores the stream moves only while none of them computes, and a reduction that waits in the
// stream's queue meets its gradients as cold as the spread sweep's.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/predict/replay.h"
#include "harness/predict/simulate.h"

namespace zb {
namespace {

CollRecord reduction(uint64_t count) { return CollRecord{Coll::all_reduce, count, DType::bf16}; }

// Every compute op 2 s; a collective of `count` elements takes `count` seconds, and `cold`
// times that where it meets its gradients cold (CollCost::unwritten_s; NaN: never).
StepPrediction replay(const ScheduleLog& log, const HostShare* host, double cold = NAN) {
  return predict_step(
      log.ops(), [](const ScheduleOp&) { return 2.0; },
      [cold](const CollRecord& c) {
        CollCost k{double(c.count), 0, false};
        k.unwritten_s = cold * double(c.count);
        return k;
      },
      nullptr, nullptr, host);
}

TEST(CrowdedHost, WhereRanksOutnumberTheCoresTheStreamMovesOnlyWhileNoneComputes) {
  // A 3 s reduction issued after a 2 s backward, under a second backward whose last second
  // keeps the host busy; the optimizer waits for it.
  ScheduleLog log;
  log.step();
  log.compute("backward", 1);
  log.issue(1, reduction(3));
  log.compute("backward", 0);
  log.wait(1);
  HostShare host;
  host.busy_seconds = [](const ScheduleOp& op) { return op.what == "backward" ? 1.0 : 0.0; };
  host.stream_rate = 0.5;
  // Two ranks' busy spells, each half the op, fall apart: the stream runs at (1 - 1/2)^2 of its
  // speed through all of the second backward, 0.5 s of work by t=4; 2.5 s left, until 6.5.
  host.outnumbered_ranks = 2;
  StepPrediction p = replay(log, &host);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.5);
  EXPECT_DOUBLE_EQ(p.step_s, 6.5);
  EXPECT_DOUBLE_EQ(p.comm_s, 3.0);  // no compute: nothing to wait for
  host.outnumbered_ranks = 3;       // (1/2)^3: 0.25 s of work by t=4
  EXPECT_DOUBLE_EQ(replay(log, &host).exposed_s, 2.75);
  // As many cores as ranks: half speed in the busy second, full in the sleeping one.
  host.outnumbered_ranks = 0;
  EXPECT_DOUBLE_EQ(replay(log, &host).exposed_s, 1.5);
  // host_share marks a node crowded only where its ranks outnumber its cores.
  EXPECT_EQ(host_share(2, 4).outnumbered_ranks, 4);
  EXPECT_EQ(host_share(2, 2).outnumbered_ranks, 0);
  EXPECT_EQ(host_share(0, 8).outnumbered_ranks, 0);  // devices: the host is not shared
}

TEST(CrowdedHost, AReductionQueuedBehindAnotherMeetsItsGradientsColdByTheBytesBetween) {
  // Two reductions issued together after a 2 s backward, each 1.5 times as long cold; the
  // optimizer waits for the second.
  auto two = [](uint64_t first, uint64_t second) {
    ScheduleLog log;
    log.step();
    log.compute("backward", 0);
    log.issue(1, reduction(first));
    log.issue(2, reduction(second));
    log.wait(2);
    return log;
  };
  // The first (1 s) starts at once and finds its gradients as the backward left them. The
  // second (2 s) starts at 3, after half its bytes passed through the caches: half cold,
  // 2 + 0.5 * (3 - 2) = 2.5 s, until 5.5.
  StepPrediction p = replay(two(1, 2), nullptr, 1.5);
  EXPECT_DOUBLE_EQ(p.step_s, 5.5);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3.5);
  EXPECT_DOUBLE_EQ(p.comm_s, 4.5);  // the round with no backward: both cold, 1.5 + 3
  // The larger first: the smaller waits behind twice its bytes, wholly cold (1.5 s), 4 to 5.5.
  EXPECT_DOUBLE_EQ(replay(two(2, 1), nullptr, 1.5).step_s, 5.5);
  // Where the sweep was not spread there is no cold time: 1 + 2 s, until 5.
  EXPECT_DOUBLE_EQ(replay(two(1, 2), nullptr).step_s, 5.0);
}

}  // namespace
}  // namespace zb
