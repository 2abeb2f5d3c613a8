// Recording backend: a communicator that logs a schedule instead of moving data.
#pragma once

#include <memory>

#include "harness/comm/communicator.h"
#include "harness/comm/schedule_log.h"

namespace zb {

// Rank `rank` of `ranks`; buffers are MemKind::reserved (never touched). Issues and waits go to
// `log`, which the caller also gives the step so it can log its compute in between.
std::unique_ptr<Communicator> make_recording_communicator(int rank, int ranks, ScheduleLog* log);

}  // namespace zb
