// A logged step replayed on two engines: compute runs the step's compute in program order, and
// the communication stream runs its collectives in issue order, each starting once it is issued
// and the previous one is done, at its swept speed or, while compute keeps a shared host busy,
// slower. Where compute waits for a collective that has not finished, the wait is exposed
// communication: the critical path of the schedule, as the step declares it.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness/comm/schedule_log.h"
#include "harness/core/trace.h"
#include "harness/predict/coll_model.h"

namespace zb {

struct StepPrediction {
  double step_s = 0;     // the compute engine's time through the step, waits included
  double compute_s = 0;  // its compute alone
  double stream_s = 0;   // the communication stream's busy time: the collectives back to back
  double comm_s = 0;     // the step with no compute at all (predict_step; what zb_zero's comm_s times)
  double exposed_s = 0;  // time compute waited for them (the rank that waited longest, with RankSkew)
  double skew_wait_s = 0;  // of that, waiting until the slowest rank had issued what was waited for
  int collectives = 0;
  bool extrapolated = false;  // some collective's time was extrapolated beyond the sweep
  bool modelled = false;      // some collective was priced from a tier's link, not read off the sweep
};

// What one collective costs: its time on the stream, and what a wait that has to block on it
// costs beyond its end (the hand-off back to the waiter: a serial sweep's time per collective
// less the back-to-back one; 0 without one). A wait that finds it done costs nothing.
struct CollCost {
  double seconds = 0, handoff_s = 0;
  bool extrapolated = false;
  bool modelled = false;  // from a tier's fitted link (tiers.h), not read off the sweep
  // Issued to a stream idle for at least wake_after_s, it starts wake_s late: the
  // communication thread and the cores woken (a sweep's serial_idle_s less serial_s; 0: none).
  double wake_s = 0, wake_after_s = 0;
  // Its seconds where it meets its gradients cold: in the round with communication alone
  // (zb_zero's comm_s), where no backward wrote the gradients a reduction reads, and in part
  // where it waited in the stream's queue while other collectives' bytes passed through the
  // caches. The spread sweep's time for one whose buffer no earlier collective of the step
  // used. NaN: `seconds` always.
  double cold_s = NAN;
};

// One op of the last step as the replay placed it, seconds from the step's start: compute from
// start to end; a collective issued at issue_s, on the stream from start to end; a wait from
// start to end (start == end where it found its collective done).
struct OpTiming {
  ScheduleOp::Kind kind;
  std::string what;  // compute: forward, backward, update, idle
  int layer = -1;
  uint64_t seq = 0;  // issue: its number; wait: the number waited for
  double issue_s = 0, start_s = 0, end_s = 0;
  double bytes = 0;  // issue
};

// Where both engines share the host's cores (CPU backends: the communication thread and the
// rank's compute take turns on them), compute that keeps the cores busy slows the stream.
struct HostShare {
  // The last part of a compute op, in seconds, that keeps the host's cores busy (the rest of it
  // sleeps); none: every op leaves them idle.
  std::function<double(const ScheduleOp&)> busy_seconds;
  // The stream's speed meanwhile, as a fraction of its swept speed (0: it stops).
  double stream_rate = 1;
  // Its speed while only some ranks' busy spells run (RankSkew: the fastest rank's has begun,
  // the slowest's not yet, or the other way round at its end).
  double skewed_rate = 1;
  // Where a node's ranks outnumber its cores (0: they do not): how many. A collective then
  // moves only on the cores no rank computes on, since a busy rank keeps its core for a time
  // slice and the communication threads wait for one; their spells fall apart (each rank's own
  // lateness), so over an op with `busy` of `d` seconds busy each rank computes with the
  // chance busy/d and the stream runs at the expected share of the cores left free (binomial).
  int outnumbered_ranks = 0;
  // Their cores. A collective that all of them blocked on does not let them all go at once:
  // the first `cores` to see it end go on, and where their compute keeps the cores busy from
  // the start (the optimizer's updates), the others' communication threads finish it only once
  // a core frees, after each wave of `cores` ranks has run that busy spell. The replay's rank
  // is the last to go: its wait lasts that much longer, while the stream stands still.
  int outnumbered_cores = 0;
};

// Ranks that run the same compute at different speeds (one core shared more than another).
// The replay follows the slowest rank, whose issue starts each collective; the fastest gains
// `lag_seconds(op)` on it with every compute op, so it reaches each wait that much earlier,
// until a wait that blocks them both lines them up again. The step's exposed communication
// is then the fastest rank's, as zb_zero reports the rank that waited most. On a shared host
// the fastest rank's busy spell begins and ends that much earlier than the slowest's: the
// stream runs at the skewed rate for the lead at each end, and at the rate of every rank busy
// where both spells overlap.
struct RankSkew {
  std::function<double(const ScheduleOp&)> lag_seconds;
};

// Replays `ops` and returns the prediction for the last step in it (ops from an earlier step
// set up what the last one meets, such as gathers still in flight). `compute_seconds` gives each
// compute op's duration, `coll_cost` each collective's, `host` (optional) how compute slows the
// stream, `skew` (optional) how far the ranks drift apart. `spans` (optional) gets the last
// step's predicted timeline (the slowest rank's), in seconds from its start, on the tracks of a
// measured trace; `timeline` (optional) every op of the last step in program order.
StepPrediction simulate(const std::vector<ScheduleOp>& ops,
                        const std::function<double(const ScheduleOp&)>& compute_seconds,
                        const std::function<CollCost(const CollRecord&)>& coll_cost,
                        std::vector<TraceSpan>* spans = nullptr, std::vector<OpTiming>* timeline = nullptr,
                        const HostShare* host = nullptr, const RankSkew* skew = nullptr);

// simulate(), with comm_s from a second replay of the same ops with every compute op at 0 s:
// the step of communication alone, its waits and hand-offs included, as zb_zero times comm_s;
// there each collective costs its `cold_s` where it has one.
// `comm_timeline` (optional) gets that replay's ops.
StepPrediction predict_step(const std::vector<ScheduleOp>& ops,
                            const std::function<double(const ScheduleOp&)>& compute_seconds,
                            const std::function<CollCost(const CollRecord&)>& coll_cost,
                            std::vector<TraceSpan>* spans = nullptr, std::vector<OpTiming>* timeline = nullptr,
                            const HostShare* host = nullptr, const RankSkew* skew = nullptr,
                            std::vector<OpTiming>* comm_timeline = nullptr);

}  // namespace zb
