// Bus-bandwidth factors, ideal wire bytes and volume accounting, the all-to-all's included.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "harness/comm/node_traffic.h"
#include "harness/comm/topology.h"
#include "harness/comm/traffic.h"

using zb::Coll;

TEST(Traffic, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_gather, 3), 2.0 / 3.0);
  // nccl-tests' alltoall: (N-1)/N, the share of its buffer a rank sends to the others.
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_to_all, 4), 0.75);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_to_all, 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_to_all, 1), 0.0);
}

TEST(Traffic, IdealWireBytesOfRing) {
  // 16 MiB all-reduce on 4 ranks: each rank sends 2 * 3/4 of the buffer.
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::all_reduce, 16u << 20, 4), 24.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::reduce_scatter, 12, 3), 8.0);
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::all_gather, 1000, 1), 0.0);
  // All-to-all of 12 bytes on 3 ranks: a 4-byte block to each of the 2 others.
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::all_to_all, 12, 3), 8.0);
}

TEST(Traffic, AllToAllCountsOnceLikeTheReduceScatterItReplaces) {
  zb::TrafficLog log;
  zb::CollRecord rec{Coll::all_to_all, 100, zb::DType::f32};
  rec.ranks = 4;
  rec.wire_measured = 300;  // 3/4 of 400 bytes: 100 elements on the wire's terms
  log.add(rec);
  EXPECT_DOUBLE_EQ(log.volume_elements(), 100.0);
  EXPECT_DOUBLE_EQ(log.ideal_wire_bytes(4), 300.0);
  EXPECT_DOUBLE_EQ(log.measured_volume_elements(4), 100.0);
  EXPECT_EQ(zb::collective_label(rec), "all_to_all 400 B (fp32)");
}

TEST(Traffic, AllToAllSendsEachPeerItsBlockAcrossOrWithinTheNode) {
  // 4 ranks as 2 nodes of 2. Over the world, a rank sends its node's other rank one block and
  // each rank of the other node one: 1 block intra, 2 inter. No ring: a ring would put all
  // 3 blocks' worth on one link.
  zb::Topology topo;
  ASSERT_TRUE(zb::modelled_topology(4, 2, &topo));
  for (int rank : {0, 2}) {
    topo.rank = rank;
    topo.node = topo.node_of[size_t(rank)];
    zb::CollRecord rec{Coll::all_to_all, 400, zb::DType::f32};  // 1600 bytes: blocks of 400
    zb::NodeBytes world = zb::ring_node_bytes(rec, topo);
    EXPECT_DOUBLE_EQ(world.intra, 400.0);
    EXPECT_DOUBLE_EQ(world.inter, 800.0);
    rec.group = zb::Group::node;  // 2 ranks: 1600 bytes in blocks of 800, one to the other rank
    EXPECT_DOUBLE_EQ(zb::ring_node_bytes(rec, topo).intra, 800.0);
    EXPECT_DOUBLE_EQ(zb::ring_node_bytes(rec, topo).inter, 0.0);
    rec.group = zb::Group::cross;
    EXPECT_DOUBLE_EQ(zb::ring_node_bytes(rec, topo).inter, 800.0);
    EXPECT_DOUBLE_EQ(zb::ring_node_bytes(rec, topo).intra, 0.0);
  }
}

TEST(Traffic, LogCountsAllReduceTwice) {
  zb::TrafficLog log;
  log.add({Coll::all_reduce, 100, zb::DType::bf16});
  log.add({Coll::reduce_scatter, 100, zb::DType::f32});
  log.add({Coll::all_gather, 100, zb::DType::bf16});
  EXPECT_DOUBLE_EQ(log.volume_elements(), 400.0);
  // bytes: 200 (x2 x 1/2) + 400 (x 1/2) + 200 (x 1/2) at N = 2
  EXPECT_DOUBLE_EQ(log.ideal_wire_bytes(2), 200.0 + 200.0 + 100.0);
  log.clear();
  EXPECT_TRUE(log.records().empty());
}

TEST(Traffic, ProcessWriteCounterGrowsWithWrites) {
  int64_t before = zb::process_write_bytes();
  ASSERT_GE(before, 0);
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  char buf[4096] = {0};
  ASSERT_EQ(write(fileno(f), buf, sizeof buf), ssize_t(sizeof buf));
  std::fclose(f);
  EXPECT_GE(zb::process_write_bytes() - before, 4096);
}

TEST(Traffic, CollNames) {
  zb::Coll c;
  ASSERT_TRUE(zb::parse_coll("reduce_scatter", &c));
  EXPECT_EQ(c, Coll::reduce_scatter);
  EXPECT_FALSE(zb::parse_coll("allreduce", &c));
  ASSERT_TRUE(zb::parse_coll("all_to_all", &c));
  EXPECT_EQ(c, Coll::all_to_all);
  EXPECT_STREQ(zb::coll_name(Coll::all_to_all), "all_to_all");
  EXPECT_EQ(zb::coll_choices().size(), 4u);
}
