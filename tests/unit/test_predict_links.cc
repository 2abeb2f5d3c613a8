// The predictor's links on synthetic data: a ring's cost, a tier's latency and bandwidth
// recovered exactly from points made with them, collectives over more ranks than swept (and
// over a node's shared links) priced from the fit, an in-place collective from its own sweep,
// required_link_gbps for a step solved by hand, and a quantized step's kernels priced and
// weighed against the step unquantized.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "harness/predict/kernel_rates.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/pricing.h"
#include "harness/predict/replay.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"

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
  // Nothing over more than one rank: nothing to fit.
  EXPECT_FALSE(fit_link(synthetic(alpha, spb, 1), &f));
}

SweepSeries series(Coll op, int ranks, Tier tier, const std::string& group, double alpha, double spb) {
  SweepSeries s;
  s.op = op, s.dtype = "bf16", s.group = group, s.ranks = ranks, s.tier = tier;
  const LinkFit link{alpha, spb, 0};
  for (double b = 65536; b <= 4 << 20; b *= 2) s.points.push_back({b, ring_seconds(op, ranks, b, link)});
  return s;
}

// `json`, zb_collectives results as a file named `name` would hold them, read as a sweep.
Status load_sweep_text(const std::string& name, const std::string& json, Sweep* out) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << json;
  Status s = Sweep::load(path, 0, out);
  std::remove(path.c_str());
  return s;
}

CollRecord rec(Coll op, uint64_t bytes, Group g, int ranks) {
  CollRecord c{op, bytes / 2, DType::bf16};
  c.group = g, c.ranks = ranks;
  return c;
}

TEST(Pricer, ReadsTheSweepWhereItTimedTheCollectiveAndScalesTheRingElsewhere) {
  // Swept on 2 nodes of 1 rank (the links between nodes) and on one node of 2 ranks.
  const double a_in = 20e-6, b_in = 1e-9, a_x = 2e-6, b_x = 1e-10;
  std::vector<SweepSeries> ss;
  for (Coll op : {Coll::all_reduce, Coll::all_gather}) {
    ss.push_back(series(op, 2, Tier::inter, "world", a_in, b_in));
    ss.push_back(series(op, 2, Tier::intra, "node", a_x, b_x));
  }
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series(ss, 2, 2, 0, &sweep));
  const Tiers tiers = fit_tiers(sweep);
  ASSERT_TRUE(tiers.inter.ok() && tiers.intra.ok());
  EXPECT_NEAR(tiers.inter.alpha_s, a_in, 1e-15);
  Status missing;
  // As swept: 2 nodes of 1, read off the sweep (1 MiB is a swept size).
  Topology two;
  ASSERT_TRUE(modelled_topology(2, 1, &two));
  CollCost c = Pricer(sweep, tiers, two).cost(rec(Coll::all_reduce, 1 << 20, Group::world, 2), &missing);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.seconds, 2 * a_in + 1.0 * (1 << 20) * b_in, 1e-12);
  // 4 nodes of 1: a ring of 4 over the links between nodes.
  Topology four;
  ASSERT_TRUE(modelled_topology(4, 1, &four));
  c = Pricer(sweep, tiers, four).cost(rec(Coll::all_reduce, 1 << 20, Group::world, 4), &missing);
  EXPECT_TRUE(c.modelled);
  EXPECT_NEAR(c.seconds, 6 * a_in + 1.5 * (1 << 20) * b_in, 1e-12);
  // 2 nodes of 2: the world's ring has hops of both tiers; the node group is intra-node.
  Topology mixed;
  ASSERT_TRUE(modelled_topology(4, 2, &mixed));
  c = Pricer(sweep, tiers, mixed).cost(rec(Coll::all_gather, 1 << 20, Group::world, 4), &missing);
  EXPECT_NEAR(c.seconds, 3 * (a_in + (1 << 20) / 4.0 * b_in), 1e-12);
  c = Pricer(sweep, tiers, mixed).cost(rec(Coll::all_gather, 1 << 20, Group::node, 2), &missing);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.seconds, a_x + 0.5 * (1 << 20) * b_x, 1e-12);
  // The links between nodes at 8 Gbit/s: modelled at that rate, latency kept.
  c = Pricer(sweep, tiers, two, 8).cost(rec(Coll::all_reduce, 1 << 20, Group::world, 2), &missing);
  EXPECT_TRUE(c.modelled);
  EXPECT_NEAR(c.seconds, 2 * a_in + 1.0 * (1 << 20) * 1e-9, 1e-12);
  EXPECT_TRUE(missing);
  // An op no tier can price over the links between nodes: one line naming it.
  Sweep intra_only;
  ASSERT_TRUE(Sweep::from_series({series(Coll::all_reduce, 2, Tier::intra, "world", a_x, b_x)}, 2, 1, 0, &intra_only));
  const Tiers t2 = fit_tiers(intra_only);
  Pricer(intra_only, t2, four).cost(rec(Coll::all_reduce, 1 << 20, Group::world, 4), &missing);
  EXPECT_FALSE(missing);
  EXPECT_NE(missing.message().find("inter-node"), std::string::npos) << missing.message();
}

TEST(Pricer, AnInPlaceCollectiveIsReadOffTheSeriesSweptInPlace) {
  // One node of 2: the all-reduce swept both ways, in place twice as fast; the all-gather out
  // of place only.
  const double a = 20e-6, b = 1e-9;
  SweepSeries out = series(Coll::all_reduce, 2, Tier::intra, "world", a, b);
  SweepSeries in = series(Coll::all_reduce, 2, Tier::intra, "world", a / 2, b / 2);
  in.in_place = true;
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series({out, in, series(Coll::all_gather, 2, Tier::intra, "world", a, b)}, 2, 1, 0, &sweep));
  const Tiers tiers = fit_tiers(sweep);
  EXPECT_NEAR(tiers.intra.alpha_s, a, 1e-15);  // the link is fitted out of place alone
  EXPECT_NEAR(tiers.intra.seconds_per_byte, b, 1e-21);
  Topology node;
  ASSERT_TRUE(modelled_topology(2, 2, &node));
  const Pricer pricer(sweep, tiers, node);
  Status missing;
  CollRecord ar = rec(Coll::all_reduce, 1 << 20, Group::world, 2);
  EXPECT_NEAR(pricer.cost(ar, &missing).seconds, 2 * a + 1.0 * (1 << 20) * b, 1e-12);
  ar.in_place = true;
  EXPECT_NEAR(pricer.cost(ar, &missing).seconds, 2 * a / 2 + 1.0 * (1 << 20) * b / 2, 1e-12);
  // Where the sweep timed it out of place only, that prices it.
  CollRecord ag = rec(Coll::all_gather, 1 << 20, Group::world, 2);
  ag.in_place = true;
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, a + 0.5 * (1 << 20) * b, 1e-12);
  EXPECT_TRUE(missing);

  // zb_collectives names an in-place benchmark /placement:in; read into its own series.
  Sweep read;
  ASSERT_TRUE(load_sweep_text("zb_placement.json", R"({"context": {"world_size": "2"}, "benchmarks": [
      {"name": "all_reduce/bytes:65536/dtype:bf16", "real_time": 40, "time_unit": "us"},
      {"name": "all_reduce/bytes:131072/dtype:bf16", "real_time": 60, "time_unit": "us"},
      {"name": "all_reduce/bytes:65536/dtype:bf16/placement:in", "real_time": 30, "time_unit": "us"},
      {"name": "all_reduce/bytes:131072/dtype:bf16/placement:in", "real_time": 45, "time_unit": "us"}]})", &read));
  ASSERT_EQ(read.series().size(), 2u);
  const SweepSeries* s_in = read.find(Coll::all_reduce, DType::bf16, 2, Tier::intra, "world", true);
  const SweepSeries* s_out = read.find(Coll::all_reduce, DType::bf16, 2, Tier::intra, "world", false);
  ASSERT_TRUE(s_in && s_out);
  EXPECT_TRUE(s_in->in_place);
  EXPECT_FALSE(s_out->in_place);
  EXPECT_DOUBLE_EQ(s_in->model.predict(65536).seconds, 30e-6);
  EXPECT_DOUBLE_EQ(s_out->model.predict(131072).seconds, 60e-6);
}

TEST(Pricer, AGatherPaysThePartOfTheSpreadSweepsExtraTimeItsColdBytesMake) {
  // One node of 4: the all-gather timed on one buffer and spread, both placements; spread
  // costs 3 times as much. The all-reduce spread only, 5 times as much.
  const double a = 20e-6, b = 1e-9;
  SweepSeries warm_out = series(Coll::all_gather, 4, Tier::intra, "world", a, b);
  SweepSeries cold_out = series(Coll::all_gather, 4, Tier::intra, "world", 3 * a, 3 * b);
  SweepSeries warm_in = warm_out, cold_in = cold_out;
  warm_in.in_place = cold_in.in_place = true;
  cold_out.footprint = cold_in.footprint = 16 << 20;
  SweepSeries ar = series(Coll::all_reduce, 4, Tier::intra, "world", a, b);
  SweepSeries ar_cold = series(Coll::all_reduce, 4, Tier::intra, "world", 5 * a, 5 * b);
  ar_cold.footprint = 16 << 20;
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series({cold_out, warm_out, cold_in, warm_in, ar_cold, ar}, 4, 1, 0, &sweep));
  const Tiers tiers = fit_tiers(sweep);
  EXPECT_NEAR(tiers.intra.alpha_s, a, 1e-15);  // fitted from the calls on one buffer
  EXPECT_NEAR(tiers.intra.seconds_per_byte, b, 1e-21);
  Topology node;
  ASSERT_TRUE(modelled_topology(4, 4, &node));
  const Pricer pricer(sweep, tiers, node);
  Status missing;
  const double mib = 1 << 20, warm = 3 * a + 0.75 * mib * b, extra = 2 * warm;
  // Out of place (z3's gather into a reused buffer): its 1/4 block cold, of the 1 + 1/4 the
  // spread call found cold: a fifth of the extra.
  CollRecord ag = rec(Coll::all_gather, 1 << 20, Group::world, 4);
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, warm + extra / 5, 1e-12);
  // In place (z1's and z2's gather into the weights): all of it cold, all of the extra.
  ag.in_place = true;
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, warm + extra, 1e-12);
  // A reduction reads gradients just written: one buffer's time, though the sweep spread it.
  EXPECT_NEAR(pricer.cost(rec(Coll::all_reduce, 1 << 20, Group::world, 4), &missing).seconds,
              6 * a + 1.5 * mib * b, 1e-12);
  EXPECT_TRUE(missing);
  // Against a sweep of the other placement: out of place against in place, a quarter of it.
  EXPECT_DOUBLE_EQ(gather_cold_fraction(false, true, 4), 0.25);
  EXPECT_DOUBLE_EQ(gather_cold_fraction(true, false, 4), 0.8);
  EXPECT_DOUBLE_EQ(gather_cold_fraction(false, false, 2), 1.0 / 3);
  // Spread alone, as an older sweep timed it: read off the spread series.
  Sweep spread_only;
  ASSERT_TRUE(Sweep::from_series({cold_out}, 4, 1, 0, &spread_only));
  const Tiers t1 = fit_tiers(spread_only);
  ag.in_place = false;
  EXPECT_NEAR(Pricer(spread_only, t1, node).cost(ag, &missing).seconds, 3 * warm, 1e-12);

  // zb_collectives names a spread benchmark /footprint:B; read into its own series.
  Sweep read;
  ASSERT_TRUE(load_sweep_text("zb_footprint.json", R"({"context": {"world_size": "4"}, "benchmarks": [
      {"name": "all_gather/bytes:65536/dtype:bf16", "real_time": 40, "time_unit": "us"},
      {"name": "all_gather/bytes:131072/dtype:bf16", "real_time": 60, "time_unit": "us"},
      {"name": "all_gather/bytes:65536/dtype:bf16/footprint:16777216", "real_time": 90, "time_unit": "us"},
      {"name": "all_gather/bytes:131072/dtype:bf16/footprint:16777216", "real_time": 160, "time_unit": "us"}]})",
                              &read));
  ASSERT_EQ(read.series().size(), 2u);
  const SweepSeries* one = read.find(Coll::all_gather, DType::bf16, 4, Tier::intra);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->footprint, 0u);
  const SweepSeries* spread = read.spread_of(*one);
  ASSERT_TRUE(spread);
  EXPECT_EQ(spread->footprint, 16u << 20);
  EXPECT_EQ(read.spread_of(*spread), nullptr);
  EXPECT_DOUBLE_EQ(spread->model.predict(131072).seconds, 160e-6);
  const Pricer from_file(read, fit_tiers(read), node);
  EXPECT_NEAR(from_file.cost(rec(Coll::all_gather, 131072, Group::world, 4), &missing).seconds,
              60e-6 + (160e-6 - 60e-6) / 5, 1e-15);
}

TEST(Pricer, ANodesRanksShareItsLinksAcrossNodesWhereItHasFewerThanRanks) {
  // Swept on 2 nodes of 1: each cross collective had the node's link to itself.
  const double a = 20e-6, b = 1e-9, mib = 1 << 20;
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series({series(Coll::all_reduce, 2, Tier::inter, "cross", a, b),
                                  series(Coll::all_gather, 2, Tier::inter, "world", a, b)},
                                 2, 2, 0, &sweep));
  Topology two_by_two;
  ASSERT_TRUE(modelled_topology(4, 2, &two_by_two));
  Status missing;
  const CollRecord cross = rec(Coll::all_reduce, 1 << 20, Group::cross, 2);
  const double alone = 2 * a + 1.0 * mib * b;
  // A NIC per rank (the default), or as many links as ranks: nothing shared.
  for (int links : {0, 2}) {
    const Tiers t = fit_tiers(sweep, links);
    EXPECT_NEAR(Pricer(sweep, t, two_by_two).cost(cross, &missing).seconds, alone, 1e-12) << links;
  }
  // One link for the node's 2 ranks: each cross all-reduce runs at half the link, read off
  // the sweep or at a given rate (8 Gbit/s, 1 ns a byte, shared: 2).
  const Tiers one = fit_tiers(sweep, 1);
  EXPECT_DOUBLE_EQ(one.sharing(2), 2.0);
  EXPECT_NEAR(Pricer(sweep, one, two_by_two).cost(cross, &missing).seconds, 2 * alone, 1e-12);
  EXPECT_NEAR(Pricer(sweep, one, two_by_two, 8).cost(cross, &missing).seconds, 2 * a + 2.0 * mib * 1e-9, 1e-12);
  // The world's ring crosses each node's link once each way: not shared.
  EXPECT_NEAR(Pricer(sweep, one, two_by_two).cost(rec(Coll::all_gather, 1 << 20, Group::world, 4), &missing).seconds,
              3 * (a + mib / 4 * b), 1e-12);
  // A sweep over 2 nodes of 2 with one link each timed its cross collectives shared: the fit
  // takes one link's own rate back out of them, and they read off as swept at that shape.
  SweepSeries shared = series(Coll::all_reduce, 2, Tier::inter, "cross", 0, 2 * b);
  Sweep swept_shared;
  ASSERT_TRUE(Sweep::from_series({shared}, 4, 2, 0, &swept_shared));
  const Tiers t22 = fit_tiers(swept_shared, 1);
  EXPECT_NEAR(t22.inter.seconds_per_byte, b, b * 1e-9);
  EXPECT_NEAR(Pricer(swept_shared, t22, two_by_two).cost(cross, &missing).seconds, 2.0 * mib * b, 1e-12);
  EXPECT_TRUE(missing);
}

TEST(Pricer, OneRankIsReadOffTheSweepWhereItWasTimed) {
  // nccl-tests at one GPU (-g 1) still times each collective (a copy on the device): a step
  // predicted at one rank from it costs those times, not nothing.
  SweepSeries one;
  one.op = Coll::all_reduce, one.dtype = "bf16", one.group = "world", one.ranks = 1, one.tier = Tier::intra;
  one.points = {{65536, 5e-6}, {131072, 7e-6}};
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series({one}, 1, 1, 0, &sweep));
  const Tiers tiers = fit_tiers(sweep);
  Topology solo;
  ASSERT_TRUE(modelled_topology(1, 1, &solo));
  Status missing;
  CollCost c = Pricer(sweep, tiers, solo).cost(rec(Coll::all_reduce, 98304, Group::world, 1), &missing);
  EXPECT_FALSE(c.modelled);
  EXPECT_NEAR(c.seconds, 6e-6, 1e-15);  // halfway between the two swept sizes
  // An op the sweep did not time over one rank: nothing crosses a link, so it costs nothing.
  c = Pricer(sweep, tiers, solo).cost(rec(Coll::all_gather, 98304, Group::world, 1), &missing);
  EXPECT_EQ(c.seconds, 0);
  EXPECT_TRUE(missing);
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

TEST(RequiredLinkGbps, AStepSolvedByHand) {
  // Two nodes of one rank; one layer of 1 s forward and 2 s backward, then its all-reduce of
  // 1e9 bytes, which the update waits for whole. Exposed = T, step = 3 + T, with
  // T = 2 (N-1) alpha + 2 (N-1)/N x 1e9 x 8 / (G 1e9) = 2 alpha + 8 / G at N = 2. Exposed within
  // 5% of the step: T <= 0.05 (3 + T), T <= 3 / 19; with alpha = 10 ms, G = 8 / (3/19 - 0.02).
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
  const double want = 8 / (3.0 / 19 - 2 * alpha);
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
