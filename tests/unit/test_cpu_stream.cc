// The CPU stream's waiter: whether it checks for the collective's end before it sleeps.
#include <gtest/gtest.h>

#include "harness/comm/cpu_stream.h"

using zb::waiter_spin_seconds;

TEST(CpuStream, WaiterSpinsOnlyWhereEachRankHasTwoCores) {
  // 2 ranks unbound on 2 cores (this project's CI machine): a core each, no spin.
  EXPECT_EQ(waiter_spin_seconds(2, 2, 2), 0.0);
  // One rank alone on 2 cores, and 8 ranks unbound on 64: two cores or more each.
  EXPECT_EQ(waiter_spin_seconds(2, 2, 1), 50e-6);
  EXPECT_EQ(waiter_spin_seconds(64, 64, 8), 50e-6);
  // Bound to one core (mpirun --bind-to core), however large the machine.
  EXPECT_EQ(waiter_spin_seconds(1, 64, 8), 0.0);
  // More ranks than cores, and nothing known of the machine.
  EXPECT_EQ(waiter_spin_seconds(2, 2, 4), 0.0);
  EXPECT_EQ(waiter_spin_seconds(1, 0, 0), 0.0);
}
