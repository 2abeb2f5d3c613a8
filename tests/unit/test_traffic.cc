// Bus-bandwidth factors, ideal wire bytes and volume accounting.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

#include "harness/comm/traffic.h"

using zb::Coll;

TEST(Traffic, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(zb::busbw_factor(Coll::all_gather, 3), 2.0 / 3.0);
}

TEST(Traffic, IdealWireBytesOfRing) {
  // 16 MiB all-reduce on 4 ranks: each rank sends 2 * 3/4 of the buffer.
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::all_reduce, 16u << 20, 4), 24.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::reduce_scatter, 12, 3), 8.0);
  EXPECT_DOUBLE_EQ(zb::ideal_wire_bytes(Coll::all_gather, 1000, 1), 0.0);
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
}
