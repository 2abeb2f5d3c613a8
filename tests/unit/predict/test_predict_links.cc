// The predictor's links on synthetic data: a ring's cost, a tier's latency and bandwidth
// recovered exactly from points made with them, required_link_gbps for a step solved by hand,
// and a quantized step's kernels priced and weighed against the step unquantized. Pricing each
// collective is test_predict_pricing.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/predict/kernel_rates.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/replay.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"
#include "tests/unit/predict/predict_fixtures.h"

namespace zb {
namespace {

TEST(Ring, StepsAndBytesOfEachOp) {
  EXPECT_DOUBLE_EQ(ring_cost(Coll::all_reduce, 4).steps, 6);
  EXPECT_DOUBLE_EQ(ring_cost(Coll::all_reduce, 4).bytes_factor, 1.5);
  EXPECT_DOUBLE_EQ(ring_cost(Coll::all_gather, 4).steps, 3);
  EXPECT_DOUBLE_EQ(ring_cost(Coll::reduce_scatter, 8).bytes_factor, 7.0 / 8);
  EXPECT_DOUBLE_EQ(ring_cost(Coll::all_gather, 1).steps, 0);
  const LinkFit link{2e-6, 1e-10, 1};
  EXPECT_DOUBLE_EQ(ring_seconds(Coll::all_reduce, 4, 1e6, link), 6 * 2e-6 + 1.5 * 1e6 * 1e-10);
  // A world of two nodes of two: each step as long as its slower hop, here the link between nodes.
  const LinkFit intra{1e-6, 1e-11, 1}, inter{3e-6, 1e-9, 1};
  EXPECT_DOUBLE_EQ(mixed_ring_seconds(Coll::all_gather, 4, 4e6, intra, inter), 3 * (3e-6 + 1e6 * 1e-9));
}

std::vector<TierPoint> synthetic(double alpha, double spb, int ranks) {
  std::vector<TierPoint> pts;
  const LinkFit link{alpha, spb, 0};
  for (Coll op : {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather})
    for (double b = 1024; b <= 16 << 20; b *= 2) pts.push_back({op, ranks, b, ring_seconds(op, ranks, b, link)});
  return pts;
}

TEST(TierFit, RecoversLatencyAndBandwidthFromSyntheticPoints) {
  const double alpha = 7.5e-6, spb = 8.0 / 12.5e9;  // 7.5 us per step, 12.5 Gbit/s
  LinkFit f;
  ASSERT_TRUE(fit_link(synthetic(alpha, spb, 4), &f));
  EXPECT_NEAR(f.alpha_s, alpha, alpha * 1e-9);
  EXPECT_NEAR(f.seconds_per_byte, spb, spb * 1e-9);
  EXPECT_NEAR(f.gbps(), 12.5, 12.5 * 1e-9);
  EXPECT_EQ(f.points, 45);
  // Points at two rank counts are one link too.
  std::vector<TierPoint> two = synthetic(alpha, spb, 2), eight = synthetic(alpha, spb, 8);
  two.insert(two.end(), eight.begin(), eight.end());
  ASSERT_TRUE(fit_link(two, &f));
  EXPECT_NEAR(f.alpha_s, alpha, alpha * 1e-9);
  EXPECT_NEAR(f.seconds_per_byte, spb, spb * 1e-9);
  // A latency below zero is refitted as none: bandwidth alone, exact again for such points.
  ASSERT_TRUE(fit_link(synthetic(0, spb, 2), &f));
  EXPECT_NEAR(f.alpha_s, 0, 1e-15);
  EXPECT_NEAR(f.seconds_per_byte, spb, spb * 1e-9);
  // A shaper's burst: the smallest sizes of a 1 Gbit/s link ran up to 4 times too fast, which
  // pulls a latency below zero, and one large size stalled. The bandwidth is the median
  // point's: the link's own rate, not one the fast points or the stalled one pull.
  const double gbit = 8e-9;
  std::vector<TierPoint> burst = synthetic(0, gbit, 2);
  for (TierPoint& p : burst) {
    if (p.bytes <= 4096) p.seconds /= 4;
    if (p.bytes == 16 << 20 && p.op == Coll::all_gather) p.seconds *= 3;
  }
  ASSERT_TRUE(fit_link(burst, &f));
  EXPECT_NEAR(f.alpha_s, 0, 1e-15);
  EXPECT_NEAR(f.seconds_per_byte, gbit, gbit * 1e-9);
  // A loaded host: every size took about 1 ms, the larger ones a little less (1% per doubling),
  // so a least-squares rate comes out below zero. Bandwidth alone again, at the median point's
  // own rate, where it used to be no fit at all.
  std::vector<TierPoint> flat = synthetic(0, gbit, 2);
  std::vector<double> own;
  for (TierPoint& p : flat) {
    p.seconds = 1e-3 * (1 - 0.01 * std::log2(p.bytes));
    own.push_back(p.seconds / (ring_cost(p.op, 2).bytes_factor * p.bytes));
  }
  ASSERT_TRUE(fit_link(flat, &f));
  EXPECT_NEAR(f.alpha_s, 0, 1e-15);
  std::sort(own.begin(), own.end());
  EXPECT_NEAR(f.seconds_per_byte, own[own.size() / 2], own[own.size() / 2] * 1e-9);
  // Nothing over more than one rank: nothing to fit.
  EXPECT_FALSE(fit_link(synthetic(alpha, spb, 1), &f));
}

// A sweep of one op between two nodes of one rank, alpha per ring step at 1 ns per byte.
Sweep two_node_sweep(Coll op, double alpha) {
  Sweep sweep;
  EXPECT_TRUE(Sweep::from_series({series(op, 2, Tier::inter, "world", alpha, 1e-9)}, 2, 2, 0, &sweep));
  return sweep;
}

// A step begun on two nodes of one rank, each layer's forward 1 s (backward 2 s) of compute.
RecordedStep two_node_step() {
  RecordedStep step;
  EXPECT_TRUE(modelled_topology(2, 1, &step.topo));
  step.compute.kind = ComputeSpec::Kind::sleep;
  step.compute.seconds = 1;
  step.log.step();
  return step;
}

// The rate of the link between two nodes of one rank at which an all-reduce of 1e9 bytes takes
// `seconds`: T = 2 (N-1) alpha + 2 (N-1)/N x 1e9 x 8 / (G 1e9) = 2 alpha + 8 / G at N = 2.
double all_reduce_gbps(double seconds, double alpha) { return 8 / (seconds - 2 * alpha); }

TEST(RequiredLinkGbps, AStepSolvedByHand) {
  // Two nodes of one rank; one layer of 1 s forward and 2 s backward, then its all-reduce of
  // 1e9 bytes (T, all_reduce_gbps), which the update waits for whole. Exposed = T, step = 3 + T.
  // Exposed within 5% of the step: T <= 0.05 (3 + T), T <= 3 / 19; with alpha = 10 ms,
  // G = 8 / (3/19 - 0.02).
  const double alpha = 0.01;
  const Sweep sweep = two_node_sweep(Coll::all_reduce, alpha);
  const Tiers tiers = fit_tiers(sweep);
  RecordedStep step = two_node_step();
  step.log.compute("forward", 0);
  step.log.compute("backward", 0);
  step.log.issue(1, rec(Coll::all_reduce, 1000000000, Group::world, 2));
  step.log.wait(1);
  step.log.compute("update", 0);
  Status missing;
  const double want = all_reduce_gbps(3.0 / 19, alpha);
  EXPECT_NEAR(step_required_link_gbps(step, sweep, tiers, 0.05, &missing), want, want * 1e-6);
  EXPECT_TRUE(missing);
  // At that rate the replay has exposed communication at 5% of the step.
  const StepPrediction p = replay(step, sweep, tiers, want, &missing);
  EXPECT_NEAR(p.exposed_s / p.step_s, 0.05, 1e-6);
  // A latency alone above the bar: no rate suffices.
  const Sweep slow = two_node_sweep(Coll::all_reduce, 1.0);
  EXPECT_TRUE(std::isnan(step_required_link_gbps(step, slow, fit_tiers(slow), 0.05, &missing)));
  // One node: no link between nodes to ask about.
  RecordedStep one = step;
  ASSERT_TRUE(modelled_topology(2, 2, &one.topo));
  EXPECT_TRUE(std::isnan(step_required_link_gbps(one, sweep, tiers, 0.05, &missing)));
}

TEST(ExposedPerComm, AStepSolvedByHand) {
  // Two nodes of one rank, two layers (forward 1 s, backward 2 s each); each backward's
  // all-reduce of 1e9 bytes, T seconds, issued as it ends, both waited for before the update.
  // The first runs from 4 to 4 + T; the second, issued at 6, queues behind it to 4 + 2T, so
  // with T >= 2 compute waits 2T - 2 from 6. Every collective 10% longer: 2.2T - 2, a change
  // of 0.2T / (2T - 2) per 0.1: T / (T - 1), 1.5 at T = 3: the backlog gains on compute.
  const double alpha = 0.01;
  const Sweep sweep = two_node_sweep(Coll::all_reduce, alpha);
  const Tiers tiers = fit_tiers(sweep);
  RecordedStep step = two_node_step();
  step.log.compute("forward", 0);
  step.log.compute("forward", 1);
  step.log.compute("backward", 1);
  step.log.issue(1, rec(Coll::all_reduce, 1000000000, Group::world, 2));
  step.log.compute("backward", 0);
  step.log.issue(2, rec(Coll::all_reduce, 1000000000, Group::world, 2));
  step.log.wait(1);
  step.log.wait(2);
  step.log.compute("update", 0);
  Status missing;
  const double gbps = all_reduce_gbps(3, alpha);
  const StepPrediction p = replay(step, sweep, tiers, gbps, &missing);
  ASSERT_NEAR(p.exposed_s, 4, 1e-9);
  EXPECT_NEAR(exposed_per_comm(step, sweep, tiers, gbps, p, &missing), 1.5, 1e-9);
  // T = 1: the first done before it is waited for, the second waited for whole: 1.
  const double fast = all_reduce_gbps(1, alpha);
  const StepPrediction q = replay(step, sweep, tiers, fast, &missing);
  ASSERT_NEAR(q.exposed_s, 1, 1e-9);
  EXPECT_NEAR(exposed_per_comm(step, sweep, tiers, fast, q, &missing), 1, 1e-9);
  // A hand-off of h = 0.5 s after each blocking wait, not stretched. It holds the stream too
  // (simulate.cc), so the second all-reduce runs from 4 + T + h and its wait ends at
  // 4 + 2T + 2h: 2T - 2 + 2h, 5 at T = 3 and 5.6 at 3.3: 1.2 (stretched hand-offs: 1.4).
  Sweep handed;
  ASSERT_TRUE(Sweep::from_series({series(Coll::all_reduce, 2, Tier::inter, "world", alpha, 1e-9)}, 2, 2, 0.5,
                                 &handed));
  const Tiers handed_tiers = fit_tiers(handed);
  const StepPrediction r = replay(step, handed, handed_tiers, gbps, &missing);
  ASSERT_NEAR(r.exposed_s, 5, 1e-9);
  EXPECT_NEAR(exposed_per_comm(step, handed, handed_tiers, gbps, r, &missing), 1.2, 1e-9);
  EXPECT_TRUE(missing);
}

TEST(ExposedPerComm, NothingOrASliverExposedMovesByJumps) {
  // One layer: the all-reduce (T) issued after the 1 s forward, waited for after the 2 s
  // backward: T - 2 exposed. Nothing at T = 1; 0.01 s at T = 2.01, under 1% of the stream's
  // 2.01 s: NaN. At T = 2.1, 0.1 s, and 0.31 s stretched: (3.1 - 1) / 0.1 = 21.
  const double alpha = 0.01;
  const Sweep sweep = two_node_sweep(Coll::all_reduce, alpha);
  const Tiers tiers = fit_tiers(sweep);
  RecordedStep step = two_node_step();
  step.log.compute("forward", 0);
  step.log.issue(1, rec(Coll::all_reduce, 1000000000, Group::world, 2));
  step.log.compute("backward", 0);
  step.log.wait(1);
  Status missing;
  for (auto [t, want] : {std::pair{1.0, double(NAN)}, std::pair{2.01, double(NAN)}, std::pair{2.1, 21.0}}) {
    const double gbps = all_reduce_gbps(t, alpha);
    const StepPrediction p = replay(step, sweep, tiers, gbps, &missing);
    ASSERT_NEAR(p.exposed_s, std::max(0.0, t - 2), 1e-9) << t;
    const double got = exposed_per_comm(step, sweep, tiers, gbps, p, &missing);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << t << ": " << got;
    else
      EXPECT_NEAR(got, want, 1e-6) << t;
  }
  EXPECT_TRUE(missing);
}

// Two nodes of one rank, one layer: 1 s of forward, then a gather of 1e9 bytes waited for.
// Quantized, the gather carries half of it, between a quantize kernel of 1e6 elements at 1e7
// per second and a dequantize of 2e6 at 2e7: 0.2 s of kernels. With the link at G Gbit/s,
// T(B) = alpha + (N-1)/N x B x 8 / (G 1e9), so the plain step is 1 + alpha + 4 / G and the
// quantized one 1.2 + alpha + 2 / G: it is faster below G = 2 / 0.2 = 10 Gbit/s.
RecordedStep gather_step(double bytes, bool quantized, const KernelRates* kernels) {
  RecordedStep step = two_node_step();
  step.kernels = kernels;
  step.log.compute("forward", 0);
  if (quantized) step.log.kernel("quantize", 0, "int8", 1e6);
  step.log.issue(1, rec(Coll::all_gather, uint64_t(bytes), Group::world, 2));
  step.log.wait(1);
  if (quantized) step.log.kernel("dequantize", 0, "int8", 2e6);
  return step;
}

TEST(QuantizedBeatsBelow, AStepSolvedByHand) {
  const double alpha = 0.01;
  const Sweep sweep = two_node_sweep(Coll::all_gather, alpha);
  const Tiers tiers = fit_tiers(sweep);
  KernelRates rates;
  rates.set("quantize", "int8", 1e7);
  rates.set("dequantize", "int8", 2e7);
  const RecordedStep plain = gather_step(1e9, false, nullptr), quantized = gather_step(5e8, true, &rates);
  Status missing;
  EXPECT_NEAR(quantize_seconds(quantized, &missing), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(quantize_seconds(plain, &missing), 0);
  EXPECT_NEAR(quantized_beats_below_gbps(quantized, plain, sweep, tiers, &missing), 10, 10 * 1e-6);
  EXPECT_TRUE(missing) << missing.message();
  const StepPrediction at5 = replay(quantized, sweep, tiers, 5, &missing);
  EXPECT_NEAR(at5.step_s, 1.2 + alpha + 2.0 / 5, 1e-9);
  EXPECT_NEAR(at5.compute_s, 1.2, 1e-12);
  // A kernel the rates do not time is named, not priced as free.
  KernelRates partial;
  partial.set("quantize", "int8", 1e7);
  const RecordedStep unpriced = gather_step(5e8, true, &partial);
  quantize_seconds(unpriced, &missing);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("dequantize of int8"), std::string::npos) << missing.message();
  // One node: no link between nodes to weigh them on.
  RecordedStep one = quantized, one_plain = plain;
  ASSERT_TRUE(modelled_topology(2, 2, &one.topo));
  ASSERT_TRUE(modelled_topology(2, 2, &one_plain.topo));
  Status fine;
  EXPECT_TRUE(std::isnan(quantized_beats_below_gbps(one, one_plain, sweep, tiers, &fine)));
}

TEST(QuantizedBeatsBelow, FasterEverywhereOrNowhere) {
  EXPECT_EQ(crossing_link_gbps([](double) { return -1.0; }), kMaxLinkGbps);
  EXPECT_TRUE(std::isnan(crossing_link_gbps([](double) { return 1.0; })));
  // gain(r) = 1 - 8 / r: faster below 8 Gbit/s.
  EXPECT_NEAR(crossing_link_gbps([](double r) { return 1 - 8 / r; }), 8, 8e-6);
}

TEST(QuantizedBeatsBelow, EachQuantizedRowIsWeighedAgainstTheRowThatShardsAsItDoes) {
  EXPECT_EQ(unquantized_stage(Stage::zpp), Stage::hpz);
  EXPECT_EQ(unquantized_stage(Stage::z3), Stage::z3);
  EXPECT_EQ(unquantized_stage(Stage::hpz), Stage::hpz);
  EXPECT_EQ(unquantized_stage(Stage::dp), Stage::dp);
}

}  // namespace
}  // namespace zb
