// The two-engine replay of a logged step.
#include "harness/predict/simulate.h"

#include <algorithm>
#include <map>

namespace zb {

StepPrediction simulate(const std::vector<ScheduleOp>& ops,
                        const std::function<double(const ScheduleOp&)>& compute_seconds,
                        const std::function<CollCost(const CollRecord&)>& coll_cost,
                        std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline) {
  double compute_clock = 0, comm_free = 0, step_start = 0;
  struct Done {
    double at, handoff_s;
  };
  std::map<uint64_t, Done> done;  // collective number -> when it completes, what a blocked wait adds
  StepPrediction p;
  std::vector<TraceSpan> drawn;
  std::vector<OpTiming> placed;
  auto span = [&](std::string name, Track track, double from, double to, std::string args = "") {
    drawn.push_back({std::move(name), track, from - step_start, to - step_start, std::move(args)});
  };
  auto place = [&](const ScheduleOp& op, double issue, double from, double to) {
    if (timeline)
      placed.push_back({op.kind, op.what, op.layer, op.seq, issue - step_start, from - step_start, to - step_start,
                        op.kind == ScheduleOp::Kind::issue ? double(op.coll.bytes()) : 0.0});
  };
  for (const ScheduleOp& op : ops) {
    switch (op.kind) {
      case ScheduleOp::Kind::step:
        p = StepPrediction();  // the last step's numbers only
        drawn.clear();
        placed.clear();
        step_start = compute_clock;
        break;
      case ScheduleOp::Kind::compute: {
        double d = compute_seconds(op);
        std::string name = op.what == "update" ? "optimizer U" : op.what + " L";
        span(name + std::to_string(op.layer), Track::compute, compute_clock, compute_clock + d);
        place(op, compute_clock, compute_clock, compute_clock + d);
        compute_clock += d;
        p.compute_s += d;
        break;
      }
      case ScheduleOp::Kind::issue: {
        CollCost c = coll_cost(op.coll);
        // Issued where the host reached it: after the compute before it (the host is the
        // engine on CPUs; on GPUs the collective waits for that compute on its stream).
        double start = std::max(comm_free, compute_clock);
        if (c.wake_s > 0 && compute_clock - comm_free >= c.wake_after_s) start += c.wake_s;
        comm_free = start + c.seconds;
        done[op.seq] = {comm_free, c.handoff_s};
        span(collective_label(op.coll), Track::comm, start, comm_free,
             "\"bytes\": " + std::to_string(op.coll.bytes()) + ", \"seq\": " + std::to_string(op.seq));
        place(op, compute_clock, start, comm_free);
        p.stream_s += c.seconds;
        p.collectives += 1;
        p.extrapolated = p.extrapolated || c.extrapolated;
        p.modelled = p.modelled || c.modelled;
        break;
      }
      case ScheduleOp::Kind::wait: {
        // Collectives complete in order: waiting for number seq is waiting for the last
        // issued at or before it.
        auto it = done.upper_bound(op.seq);
        const double from = compute_clock;
        if (it != done.begin()) {
          const Done& d = std::prev(it)->second;
          // Blocked, the waiter is woken only after the collective ends: the hand-off is exposed.
          const double ready = d.at + d.handoff_s;
          if (d.at > compute_clock) {
            span("wait", Track::wait, compute_clock, ready);
            p.exposed_s += ready - compute_clock;
            compute_clock = ready;
          }
        }
        place(op, from, from, compute_clock);
        break;
      }
    }
  }
  p.step_s = compute_clock - step_start;
  if (spans) *spans = std::move(drawn);
  if (timeline) *timeline = std::move(placed);
  return p;
}

StepPrediction predict_step(const std::vector<ScheduleOp>& ops,
                            const std::function<double(const ScheduleOp&)>& compute_seconds,
                            const std::function<CollCost(const CollRecord&)>& coll_cost,
                            std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline) {
  StepPrediction p = simulate(ops, compute_seconds, coll_cost, spans, timeline);
  p.comm_s = simulate(ops, [](const ScheduleOp&) { return 0.0; }, coll_cost).step_s;
  return p;
}

}  // namespace zb
