// Pricing each collective of a recorded step on synthetic sweeps: read off the sweep where it
// timed the op (in place or not, on one buffer or spread), from a tier's fitted link where it
// did not (more ranks, another node shape, a node's shared links), and one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "harness/predict/pricing.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"
#include "tests/unit/predict/predict_fixtures.h"

namespace zb {
namespace {

// `json`, zb_collectives results as a file named `name` would hold them, read as a sweep.
Status load_sweep_text(const std::string& name, const std::string& json, Sweep* out) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << json;
  Status s = Sweep::load(path, 0, out);
  std::remove(path.c_str());
  return s;
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

TEST(Pricer, AGatherPaysTheSpreadTimeOfItsPlacementAndReductionsOneBuffers) {
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
  // Out of place (z3's gather into a reused buffer), as the spread call ran it: its input
  // cold, its output reused. All of the extra.
  CollRecord ag = rec(Coll::all_gather, 1 << 20, Group::world, 4);
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, warm + extra, 1e-12);
  // In place (z1's and z2's gather into the weights): all of it cold, all of the extra.
  ag.in_place = true;
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, warm + extra, 1e-12);
  // A reduction reads gradients just written: one buffer's time, though the sweep spread it.
  // In the round with communication alone, the spread time; from a slot an earlier collective
  // of the step used, no other time.
  CollRecord ar_rec = rec(Coll::all_reduce, 1 << 20, Group::world, 4);
  const CollCost reduced = pricer.cost(ar_rec, &missing);
  EXPECT_NEAR(reduced.seconds, 6 * a + 1.5 * mib * b, 1e-12);
  EXPECT_NEAR(reduced.cold_s, 5 * (6 * a + 1.5 * mib * b), 1e-12);
  ar_rec.reused_buffer = true;
  EXPECT_TRUE(std::isnan(pricer.cost(ar_rec, &missing).cold_s));
  EXPECT_TRUE(missing);
  // Against a sweep of the other placement, its cold bytes over the swept call's, at most
  // all: out of place against in place, the 1/4 block of the output; in place against out
  // of place, all of the extra (not 4 times it).
  EXPECT_DOUBLE_EQ(gather_cold_fraction(false, true, 4), 0.25);
  EXPECT_DOUBLE_EQ(gather_cold_fraction(true, false, 4), 1.0);
  EXPECT_DOUBLE_EQ(gather_cold_fraction(false, false, 2), 1.0);
  EXPECT_DOUBLE_EQ(gather_cold_fraction(true, true, 2), 1.0);
  Sweep in_only;
  ASSERT_TRUE(Sweep::from_series({cold_in, warm_in}, 4, 1, 0, &in_only));
  const Tiers t_in = fit_tiers(in_only);
  ag.in_place = false;  // z3's gather from a sweep in place only: a quarter of the extra
  EXPECT_NEAR(Pricer(in_only, t_in, node).cost(ag, &missing).seconds, warm + extra / 4, 1e-12);
  // In place, swept both ways: in the round with communication alone it reads gradients no
  // backward wrote, at the in-place spread time; a gather has no such time.
  SweepSeries ar_in = ar, ar_in_cold = ar_cold;
  ar_in.in_place = ar_in_cold.in_place = true;
  Sweep with_in;
  ASSERT_TRUE(Sweep::from_series({ar_in, ar_in_cold, ar, warm_out}, 4, 1, 0, &with_in));
  const Tiers t_ar = fit_tiers(with_in);
  CollRecord in_place_ar = rec(Coll::all_reduce, 1 << 20, Group::world, 4);
  in_place_ar.in_place = true;
  const CollCost unwritten = Pricer(with_in, t_ar, node).cost(in_place_ar, &missing);
  EXPECT_NEAR(unwritten.seconds, 6 * a + 1.5 * mib * b, 1e-12);
  EXPECT_NEAR(unwritten.cold_s, 5 * (6 * a + 1.5 * mib * b), 1e-12);
  EXPECT_TRUE(std::isnan(Pricer(with_in, t_ar, node).cost(ag, &missing).cold_s));
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
  const std::vector<const SweepSeries*> spreads = read.spreads_of(*one);
  ASSERT_EQ(spreads.size(), 1u);
  EXPECT_EQ(spreads[0]->footprint, 16u << 20);
  EXPECT_TRUE(read.spreads_of(*spreads[0]).empty());
  EXPECT_DOUBLE_EQ(spreads[0]->model.predict(131072).seconds, 160e-6);
  const Pricer from_file(read, fit_tiers(read), node);
  EXPECT_NEAR(from_file.cost(rec(Coll::all_gather, 131072, Group::world, 4), &missing).seconds,
              160e-6, 1e-15);  // out of place, as swept: the spread time
}

TEST(Pricer, AGatherPaysTheSpreadTimeAtItsBuffersReuseDistance) {
  // In place on 4 ranks, an all-gather and an all-reduce each on one buffer, spread over 4 MiB
  // at twice its time and over 16 MiB at four times, listed out of order.
  const double a = 20e-6, b = 1e-9, mib = 1 << 20;
  std::vector<SweepSeries> all;
  for (Coll op : {Coll::all_gather, Coll::all_reduce}) {
    SweepSeries warm = series(op, 4, Tier::intra, "world", a, b);
    SweepSeries f4 = series(op, 4, Tier::intra, "world", 2 * a, 2 * b);
    SweepSeries f16 = series(op, 4, Tier::intra, "world", 4 * a, 4 * b);
    warm.in_place = f4.in_place = f16.in_place = true;
    f4.footprint = 4 << 20, f16.footprint = 16 << 20;
    all.insert(all.end(), {f16, warm, f4});
  }
  Sweep sweep;
  ASSERT_TRUE(Sweep::from_series(all, 4, 1, 0, &sweep));
  const SweepSeries* one = sweep.find(Coll::all_gather, DType::bf16, 4, Tier::intra, "world", true);
  ASSERT_TRUE(one);
  const std::vector<const SweepSeries*> spreads = sweep.spreads_of(*one);
  ASSERT_EQ(spreads.size(), 2u);
  EXPECT_EQ(spreads[0]->footprint, 4u << 20);
  const double w = 3 * a + 0.75 * mib * b;  // 1 MiB on one buffer
  auto at = [&](double bytes, uint64_t reuse) { return cold_prediction(*one, spreads, bytes, reuse).seconds; };
  EXPECT_NEAR(at(mib, 1 << 20), 2 * w, 1e-12);     // up to the first footprint, its time
  EXPECT_NEAR(at(mib, 4 << 20), 2 * w, 1e-12);
  EXPECT_NEAR(at(mib, 8 << 20), 3 * w, 1e-12);     // halfway from 4 to 16 MiB in the logarithm
  EXPECT_NEAR(at(mib, 64u << 20), 4 * w, 1e-12);   // past the largest footprint
  EXPECT_NEAR(at(mib, 0), 4 * w, 1e-12);           // no distance known: the largest
  // A 4 MiB call: the 4 MiB spread (one slot) left out, 16 MiB the first footprint; a 16 MiB
  // call has none left and takes the time on one buffer.
  const double w4 = 3 * a + 3 * mib * b;
  EXPECT_NEAR(at(4 * mib, 8 << 20), 4 * w4, 1e-12);
  EXPECT_NEAR(cold_prediction(*one, spreads, 16 * mib, 64u << 20).seconds,
              one->model.predict(16 * mib).seconds, 1e-12);
  // The pricer takes the distance the recorder logged for a gather, in place or out (then, from
  // an in-place sweep, its 1/4 block's part of the extra); a reduction over gradients no backward
  // wrote takes the first footprint's time (the weights') at any distance.
  Topology node;
  ASSERT_TRUE(modelled_topology(4, 4, &node));
  const Pricer pricer(sweep, fit_tiers(sweep), node);
  CollRecord ag = rec(Coll::all_gather, 1 << 20, Group::world, 4);
  ag.in_place = true;
  ag.reuse_bytes = 8 << 20;
  Status missing;
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, 3 * w, 1e-12);
  ag.in_place = false;
  EXPECT_NEAR(pricer.cost(ag, &missing).seconds, w + (3 * w - w) / 4, 1e-12);
  CollRecord ar = rec(Coll::all_reduce, 1 << 20, Group::world, 4);
  ar.in_place = true;
  ar.reuse_bytes = 8 << 20;
  const double w_ar = 6 * a + 1.5 * mib * b;
  EXPECT_NEAR(pricer.cost(ar, &missing).cold_s, 2 * w_ar, 1e-12);
  EXPECT_NEAR(pricer.cost(ar, &missing).seconds, w_ar, 1e-12);
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


// A zb_collectives sweep of 20 sizes whose reference collective took 100 us, but for the first
// `off` sizes, which took `off_s`.
std::string sweep_with_references(int off, double off_s) {
  std::string json = R"({"context": {"world_size": "2"}, "benchmarks": [)";
  for (int i = 0; i < 20; ++i)
    json += std::string(i ? "," : "") + R"({"name": "all_reduce/bytes:)" + std::to_string(65536 * (i + 1)) +
            R"(/dtype:bf16", "real_time": 40, "time_unit": "us", "reference_s": )" +
            std::to_string(i < off ? off_s : 100e-6) + "}";
  return json + "]}";
}

TEST(HostReference, SaysWhetherTheSweepRanAtOneSpeed) {
  EXPECT_TRUE(same_host_speed(100e-6, 150e-6));  // kHostChangedRatio apart: still one speed
  EXPECT_TRUE(same_host_speed(150e-6, 100e-6));
  EXPECT_FALSE(same_host_speed(100e-6, 151e-6));
  EXPECT_FALSE(same_host_speed(NAN, 100e-6));
  // A repetition: its reference before and after at one speed, and that speed the fastest's.
  EXPECT_TRUE(repetition_at_fastest_speed(100e-6, 150e-6, 100e-6));
  EXPECT_FALSE(repetition_at_fastest_speed(100e-6, 400e-6, 100e-6));  // the host slowed during it
  EXPECT_FALSE(repetition_at_fastest_speed(400e-6, 410e-6, 100e-6));  // steady, but slow
  EXPECT_TRUE(repetition_at_fastest_speed(400e-6, 410e-6, 400e-6));   // slow is all the run has seen
  // The fastest speed: the median of the sets within 1.5x of the fastest set, not that set.
  EXPECT_DOUBLE_EQ(fastest_host_speed({600e-6, 100e-6, 130e-6, 150e-6, 160e-6, 620e-6}), 130e-6);
  EXPECT_DOUBLE_EQ(fastest_host_speed({600e-6}), 600e-6);
  EXPECT_TRUE(std::isnan(fastest_host_speed({})));
  Sweep sweep;
  // One size of 20 at 4 times the others' speed: 5% off, an odd stall, the sweep steady.
  ASSERT_TRUE(load_sweep_text("zb_ref1.json", sweep_with_references(1, 400e-6), &sweep));
  EXPECT_DOUBLE_EQ(sweep.reference().median_s, 100e-6);
  EXPECT_EQ(sweep.reference().benchmarks, 20);
  EXPECT_EQ(sweep.reference().off, 1);
  EXPECT_TRUE(sweep.reference().steady());
  // Two of 20: the host changed speed during the sweep. 149 us is within the ratio of 100.
  ASSERT_TRUE(load_sweep_text("zb_ref2.json", sweep_with_references(2, 400e-6), &sweep));
  EXPECT_EQ(sweep.reference().off, 2);
  EXPECT_FALSE(sweep.reference().steady());
  ASSERT_TRUE(load_sweep_text("zb_ref3.json", sweep_with_references(5, 149e-6), &sweep));
  EXPECT_EQ(sweep.reference().off, 0);
  // Eleven of 20 slow: the median is theirs, and the nine fast ones are off.
  ASSERT_TRUE(load_sweep_text("zb_ref4.json", sweep_with_references(11, 400e-6), &sweep));
  EXPECT_DOUBLE_EQ(sweep.reference().median_s, 400e-6);
  EXPECT_EQ(sweep.reference().off, 9);
  // A sweep that timed none (nccl-tests', an older file's): no speed known, nothing off.
  ASSERT_TRUE(load_sweep_text("zb_ref5.json", R"({"context": {"world_size": "2"}, "benchmarks": [
      {"name": "all_reduce/bytes:65536/dtype:bf16", "real_time": 40, "time_unit": "us"}]})", &sweep));
  EXPECT_TRUE(std::isnan(sweep.reference().median_s));
  EXPECT_EQ(sweep.reference().benchmarks, 0);
  EXPECT_TRUE(sweep.reference().steady());
}

}  // namespace
}  // namespace zb
