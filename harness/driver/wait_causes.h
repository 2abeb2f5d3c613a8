// Exposed communication by cause: when every rank issued each collective, on one clock, and
// each wait of compute split into waiting for the last rank to issue (skew) and waiting for
// the wire. Gathered on the driver's control plane after the timed steps, never inside them.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"
#include "harness/core/trace.h"
#include "harness/stage/compute_waits.h"

namespace zb {

class Driver;

// One timing round between rank 0 and another machine's first rank: rank 0 entered it at h0
// and left at h1, the other entered at p0 and left at p1, each on its own clock. Rank 0
// answered the round once, after both had entered and before either left, so rank 0's clock
// minus the other's lies within [h0 - p1, h1 - p0].
struct ClockRound {
  double h0, h1, p0, p1;
};
// The offset all rounds allow: the middle of where their bounds meet, and half that width as
// its uncertainty; where they do not meet (a clock that drifted), the median of the rounds'
// midpoints and the largest half-width.
double clock_offset_from(const std::vector<ClockRound>& rounds, double* uncertainty_s);

// Rank 0's steady clock minus this rank's. 0 where both read one clock: the same kernel boot
// (one machine; tools/cluster.sh's nodes too). Other machines measure it in timing rounds on
// the control plane, through their first rank, and every rank of a machine takes its value.
Status clock_offset(Driver& d, double* offset_s);

// A drawn step's t = 0 on this rank's clock: the moment the earliest rank began it, where each
// rank began it at `start_s` on its own clock (`offset_s` from clock_offset). With no barrier
// before the step (it runs as the timed steps do, back to back), the ranks begin it apart, and
// every rank's spans keep those distances.
double shared_origin(Driver& d, double start_s, double offset_s);

// --trace runs this many steps and draws the one whose exposed time (its slowest rank's, as
// the timed steps count theirs) is their median: one step is one sample (docs/zero.md).
constexpr int kTraceCandidates = 3;

// One of the steps --trace chooses from: what it drew and what it cost.
struct TraceCandidate {
  std::vector<TraceSpan> spans;
  std::vector<WaitRecord> waits;
  size_t first = 0, end = 0;           // its collectives' traffic-log entries, [first, end)
  double start_s = 0, exposed_s = 0;   // when this rank began it; its exposed time here
  double tail_s = 0;                   // zb_pipeline's tail; 0 elsewhere
};
// Runs kTraceCandidates steps, each after `before(k)` (what must come first: an untimed step, a
// barrier), through `run(candidate)`, which runs the step and fills in its spans, waits and
// times (first, end and start_s are set around it here); then `finish()`. `drawn` becomes the
// one whose slowest-rank exposed time is the median, the same on every rank, and `tried` those
// times in microseconds in the order they ran ("a, b, c", a JSON array's inside).
Status draw_median_step(Driver& d, const std::function<Status(int)>& before,
                        const std::function<Status(TraceCandidate*)>& run, const std::function<Status()>& finish,
                        TraceCandidate* drawn, std::string* tried);

// draw_median_step's `run` for a ZeroStep or PipelineStep: one step, traced from a clear trace,
// its spans, waits and exposed time kept in `c`.
template <typename Step>
Status run_candidate_step(Step& step, TraceCandidate* c) {
  step.trace().clear();
  ZB_RETURN_IF_ERROR(step.step());
  c->spans = step.trace().spans();
  c->waits = step.waits().step_waits();
  c->exposed_s = step.last_exposed_s();
  return Status::ok();
}

// Per entry of a traffic log: when the last rank issued it (on this rank's clock) and which
// rank that was; and how much later it ended on this rank than on the first rank to finish it
// (0 where not recorded; empty: none known). Every rank must pass the same entries, each with
// issued_s recorded.
struct LastIssue {
  std::vector<double> at_s;
  std::vector<int> rank;
  std::vector<double> late_finish_s;
};
Status last_issues(Driver& d, const std::vector<CollRecord>& log, double offset_s, LastIssue* out);

// One rank's step: its waits, their skew and wire parts summed, and the rank that issued last
// the collective of its largest skew part (-1: none met a late rank).
struct StepCause {
  double exposed_s = 0, skew_s = 0, wire_s = 0;
  int late_rank = -1;
  double late_finish_s = 0;  // of wire_s
};
StepCause step_cause(const std::vector<WaitRecord>& waits, const LastIssue& last);

// The timed steps' exposed communication by cause, as zb_zero reports it beside
// exposed_comm_s: in each step the rank that waited longest (as exposed_comm_s takes the
// worst rank), its skew and wire parts (and the wire's late finish); the median over steps of
// each; and the late rank,
// the one most often late over the steps (ties: the lowest; -1: no wait met a late rank).
// NaN (and -1) where the engine's stream waits and the host timed nothing.
struct ExposedByCause {
  double skew_s = NAN, wire_s = NAN;
  int late_rank = -1;
  double late_finish_s = NAN;  // of wire_s: the same rank's and step's, the median over steps
};
// `steps[s][r]`: rank r's step s.
ExposedByCause exposed_by_cause(const std::vector<std::vector<StepCause>>& steps);
// Every rank passes its own timed steps' waits; gathered over ranks, then exposed_by_cause.
Status gather_exposed_by_cause(Driver& d, const std::vector<std::vector<WaitRecord>>& my_steps,
                               const LastIssue& last, ExposedByCause* out);

// A traced step's wait spans replaced by their parts: "wait for rank R" up to when the last
// rank issued what it waited for, "wait for the wire" after it (args: "awaits", "part",
// "late_rank"), so the two parts sum to the wait.
void split_wait_spans(const std::vector<WaitRecord>& waits, const LastIssue& last, std::vector<TraceSpan>* spans);

}  // namespace zb
