// Recording backend: a communicator that logs a schedule instead of moving data.
#pragma once

#include <memory>

#include "harness/comm/communicator.h"
#include "harness/comm/schedule_log.h"
#include "harness/comm/topology.h"

namespace zb {

// Rank topo.rank of topo.size, with topo's node and cross-node groups; buffers are
// MemKind::reserved (never touched). Issues and waits go to `log`, which the caller also gives
// the step so it can log its compute in between.
std::unique_ptr<Communicator> make_recording_communicator(const Topology& topo, ScheduleLog* log);

}  // namespace zb
