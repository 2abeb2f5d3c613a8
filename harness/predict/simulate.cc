// The two-engine replay of a logged step.
#include "harness/predict/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "harness/core/stats.h"

namespace zb {
namespace {

// The replay's state. Compute runs op by op; the stream is carried along to the compute
// engine's clock after each op, so its speed can follow what compute does meanwhile.
class Replay {
 public:
  Replay(const std::function<CollCost(const CollRecord&)>& coll_cost, const HostShare* host, const RankSkew* skew,
         bool draw)
      : coll_cost_(coll_cost), host_(host), skew_(skew), draw_(draw) {}

  StepPrediction run(const std::vector<ScheduleOp>& ops,
                     const std::function<double(const ScheduleOp&)>& compute_seconds) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const ScheduleOp& op = ops[i];
      switch (op.kind) {
        case ScheduleOp::Kind::step: begin_step(); break;
        case ScheduleOp::Kind::compute: compute(op, compute_seconds(op)); break;
        case ScheduleOp::Kind::issue: issue(op); break;
        case ScheduleOp::Kind::wait: wait(op, [&] { return busy_spell_after(ops, i, compute_seconds); }); break;
      }
    }
    drain(std::numeric_limits<double>::infinity(), 1);  // what is still in flight, for the drawing
    p_.step_s = clock_ - step_start_;
    return p_;
  }

  std::vector<TraceSpan> spans;
  std::vector<OpTiming> timeline;

 private:
  struct InFlight {
    uint64_t seq;
    double issued, ready, left, handoff_s;  // may start at `ready`; `left` seconds of swept work
    int generation;  // the step whose drawing holds it
    double bytes = 0, moved_at_issue = 0, cold_s = NAN;  // CollCost::cold_s
    double start = -1, work = 0;  // work: its swept seconds once started
    size_t span = 0, placed = 0;
  };
  struct Done {
    double at, handoff_s, issued;  // `issued`: when the slowest rank issued it
  };

  void begin_step() {
    p_ = StepPrediction();  // the last step's numbers only
    spans.clear();
    timeline.clear();
    ++generation_;
    step_start_ = clock_;
  }

  void compute(const ScheduleOp& op, double d) {
    const double busy = host_ && host_->busy_seconds ? std::clamp(host_->busy_seconds(op), 0.0, d) : 0.0;
    // The fastest rank, lead_ ahead, runs its busy spell that much earlier: alone for the lead,
    // then with the slowest's, which then runs alone for as long (a lead longer than the spell
    // leaves them apart, drawn here back to back). All of it within this op.
    const double alone = std::min({lead_, busy, d - busy});
    lead_ += skew_ && skew_->lag_seconds ? std::clamp(skew_->lag_seconds(op), 0.0, d) : 0.0;
    std::string name = op.what == "update" ? "optimizer U" : op.what + " L";
    span(name + std::to_string(op.layer), Track::compute, clock_, clock_ + d);
    place(op, clock_, clock_, clock_ + d);
    const double end = clock_ + d;
    // Ranks that outnumber the cores: the stream moves on the cores none of them computes on.
    if (host_ && host_->outnumbered_ranks > 0) {
      drain(end, d > 0 ? free_core_share(busy / d) : 1);
      clock_ += d;
      p_.compute_s += d;
      return;
    }
    drain(end - busy - alone, 1);
    if (alone > 0) drain(end - busy, host_->skewed_rate);
    drain(end - alone, busy > 0 ? host_->stream_rate : 1);
    if (alone > 0) drain(end, host_->skewed_rate);
    clock_ += d;
    p_.compute_s += d;
  }

  // The share of the cores that no rank's compute holds, on average, where each of the node's
  // ranks computes with the chance `u` (binomial): the stream's speed, as a share of its swept.
  double free_core_share(double u) const {
    const int cores = std::max(1, host_->outnumbered_cores);
    return binomial_mean(host_->outnumbered_ranks, u, [&](int k) { return double(std::max(0, cores - k)) / cores; });
  }

  void issue(const ScheduleOp& op) {
    const CollCost c = coll_cost_(op.coll);
    // Issued where the host reached it: after the compute before it (the host is the engine
    // on CPUs; on GPUs the collective waits for that compute on its stream).
    double ready = clock_;
    if (c.wake_s > 0 && queue_.empty() && clock_ - comm_free_ >= c.wake_after_s) ready += c.wake_s;
    InFlight f{op.seq, clock_, ready, c.seconds, c.handoff_s, generation_};
    f.bytes = double(op.coll.bytes()), f.moved_at_issue = moved_, f.cold_s = c.cold_s;
    f.span = spans.size();
    span(collective_label(op.coll), Track::comm, ready, ready,
         "\"bytes\": " + std::to_string(op.coll.bytes()) + ", \"seq\": " + std::to_string(op.seq));
    f.placed = timeline.size();
    place(op, clock_, ready, ready);
    queue_.push_back(f);
    p_.stream_s += c.seconds;
    p_.collectives += 1;
    p_.extrapolated = p_.extrapolated || c.extrapolated;
    p_.modelled = p_.modelled || c.modelled;
  }

  // Where the ranks outnumber the cores: the time a wave of ranks that leaves the wait after
  // op `i` keeps every core busy from the start: the compute ops after it that are busy
  // throughout, up to the first that is not (a layer that sleeps first) or the next wait for
  // a collective this one does not complete.
  double busy_spell_after(const std::vector<ScheduleOp>& ops, size_t i,
                          const std::function<double(const ScheduleOp&)>& compute_seconds) const {
    double spell = 0;
    for (size_t j = i + 1; j < ops.size(); ++j) {
      const ScheduleOp& op = ops[j];
      if (op.kind == ScheduleOp::Kind::step || (op.kind == ScheduleOp::Kind::wait && op.seq > ops[i].seq)) break;
      if (op.kind != ScheduleOp::Kind::compute) continue;
      const double d = compute_seconds(op), busy = std::clamp(host_->busy_seconds(op), 0.0, d);
      if (busy < d) break;
      spell += busy;
    }
    return spell;
  }

  void wait(const ScheduleOp& op, const std::function<double()>& busy_spell) {
    // Collectives complete in order: waiting for number seq is waiting for the last issued at
    // or before it. Compute is blocked meanwhile, so the stream runs at its full speed.
    const double from = clock_;
    while (!queue_.empty() && queue_.front().seq <= op.seq) drain(std::numeric_limits<double>::infinity(), 1, true);
    auto it = done_.upper_bound(op.seq);
    if (it != done_.begin()) {
      const Done& d = std::prev(it)->second;
      // Blocked, a waiter is woken only after the collective ends: the hand-off is exposed. The
      // fastest rank arrives lead_ earlier; until the slowest issued, it waits for a late rank.
      const double fast_from = clock_ - lead_, ready = d.at + d.handoff_s;
      const double fast_to = d.at > fast_from ? ready : fast_from;
      double late = 0;
      p_.exposed_s += fast_to - fast_from;
      p_.skew_wait_s += std::clamp(d.issued - fast_from, 0.0, fast_to - fast_from);
      if (d.at > clock_) {
        // The hand-off holds the stream too: on CPUs the communication thread wakes the waiter
        // on the cores it shares with it, on GPUs the host that launches the next collective
        // is the one waking. A collective queued behind starts after it, not under it.
        if (!queue_.empty()) queue_.front().ready = std::max(queue_.front().ready, ready);
        // Ranks that outnumber the cores leave in waves; this rank, the last, after the others
        // have run their busy spell, the stream standing still meanwhile.
        if (host_ && host_->outnumbered_ranks > 0 && host_->outnumbered_cores > 0 && host_->busy_seconds) {
          const int waves = (host_->outnumbered_ranks + host_->outnumbered_cores - 1) / host_->outnumbered_cores - 1;
          late = waves * busy_spell();
        }
        span("wait", Track::wait, clock_, ready + late);
        drain(ready, 1);
        if (late > 0) drain(ready + late, 0);
        clock_ = ready + late;
        p_.exposed_s += late;
      }
      // A hand-off can wake the fastest rank after the slowest went on; then neither leads. The
      // first wave's lead over the last is not carried on: the rank that waits longest waits
      // it here, and the first wave waits it once more only at the next step's first wait.
      lead_ = std::max(0.0, clock_ - late - fast_to);
    }
    place(op, from, from, clock_);
  }

  // Runs the stream until `to` at `rate` times its swept speed (or, with `one`, until its
  // next collective ends).
  void drain(double to, double rate, bool one = false) {
    while (!queue_.empty()) {
      InFlight& f = queue_.front();
      const double t = std::max(cursor_, f.ready);
      if (t >= to) break;
      if (f.start < 0) start(f, t);
      if (rate <= 0) {
        cursor_ = to;
        return;
      }
      const double end = t + f.left / rate;
      if (end > to) {
        if (f.work > 0) moved_ += f.bytes * (to - t) * rate / f.work;
        f.left -= (to - t) * rate;
        cursor_ = to;
        return;
      }
      if (f.work > 0) moved_ += f.bytes * f.left / f.work;
      finish(f, end);
      queue_.pop_front();
      if (one) return;
    }
    cursor_ = std::max(cursor_, to);
  }

  // A reduction of gradients the backward wrote finds them in the caches if it starts before
  // as many bytes again passed through them: the collectives the stream ran between its issue
  // and its start evict them in proportion, up to the spread time of one that meets them cold.
  void start(InFlight& f, double t) {
    f.start = t;
    if (std::isfinite(f.cold_s) && f.bytes > 0) {
      const double cold = std::clamp((moved_ - f.moved_at_issue) / f.bytes, 0.0, 1.0);
      const double more = cold * std::max(0.0, f.cold_s - f.left);
      f.left += more;
      if (f.generation == generation_) p_.stream_s += more;
    }
    f.work = f.left;
  }

  void finish(const InFlight& f, double end) {
    done_[f.seq] = {end, f.handoff_s, f.issued};
    cursor_ = comm_free_ = end;
    if (f.generation != generation_) return;  // an earlier step's, not drawn
    if (draw_) {
      spans[f.span].start_s = f.start - step_start_;
      spans[f.span].end_s = end - step_start_;
      timeline[f.placed].start_s = f.start - step_start_;
      timeline[f.placed].end_s = end - step_start_;
    }
  }

  void span(std::string name, Track track, double from, double to, std::string args = "") {
    if (draw_) spans.push_back({std::move(name), track, from - step_start_, to - step_start_, std::move(args)});
  }
  void place(const ScheduleOp& op, double issue, double from, double to) {
    if (draw_)
      timeline.push_back({op.kind, op.what, op.layer, op.seq, issue - step_start_, from - step_start_,
                          to - step_start_, op.kind == ScheduleOp::Kind::issue ? double(op.coll.bytes()) : 0.0});
  }

  const std::function<CollCost(const CollRecord&)>& coll_cost_;
  const HostShare* host_;
  const RankSkew* skew_;
  const bool draw_;
  double clock_ = 0, cursor_ = 0, comm_free_ = 0, step_start_ = 0;
  double lead_ = 0;  // how far the fastest rank is ahead of the slowest (RankSkew)
  double moved_ = 0;  // bytes the stream's collectives have moved so far
  int generation_ = 0;
  std::deque<InFlight> queue_;
  std::map<uint64_t, Done> done_;  // collective number -> when it completed, what a blocked wait adds
  StepPrediction p_;
};

}  // namespace

StepPrediction simulate(const std::vector<ScheduleOp>& ops,
                        const std::function<double(const ScheduleOp&)>& compute_seconds,
                        const std::function<CollCost(const CollRecord&)>& coll_cost,
                        std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline, const HostShare* host,
                        const RankSkew* skew) {
  Replay r(coll_cost, host, skew, spans || timeline);
  StepPrediction p = r.run(ops, compute_seconds);
  if (spans) *spans = std::move(r.spans);
  if (timeline) *timeline = std::move(r.timeline);
  return p;
}

StepPrediction predict_step(const std::vector<ScheduleOp>& ops,
                            const std::function<double(const ScheduleOp&)>& compute_seconds,
                            const std::function<CollCost(const CollRecord&)>& coll_cost,
                            std::vector<TraceSpan>* spans, std::vector<OpTiming>* timeline, const HostShare* host,
                            const RankSkew* skew, std::vector<OpTiming>* comm_timeline) {
  StepPrediction p = simulate(ops, compute_seconds, coll_cost, spans, timeline, host, skew);
  auto comm_round_cost = [&](const CollRecord& c) {
    CollCost k = coll_cost(c);
    if (std::isfinite(k.cold_s)) k.seconds = k.cold_s;
    return k;
  };
  p.comm_s = simulate(ops, [](const ScheduleOp&) { return 0.0; }, comm_round_cost, nullptr, comm_timeline).step_s;
  return p;
}

}  // namespace zb
