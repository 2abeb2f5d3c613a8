// Exposed communication by cause: clock offsets, the last rank to issue each collective, and
// each wait split into its skew and wire parts.
#include "harness/driver/wait_causes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "harness/core/clock.h"
#include "harness/core/stats.h"
#include "harness/driver/driver.h"

namespace zb {

double clock_offset_from(const std::vector<ClockRound>& rounds, double* uncertainty_s) {
  double lo = -INFINITY, hi = INFINITY, widest = 0;
  std::vector<double> mids;
  for (const ClockRound& r : rounds) {
    const double a = r.h0 - r.p1, b = r.h1 - r.p0;
    lo = std::max(lo, a), hi = std::min(hi, b);
    mids.push_back((a + b) / 2);
    widest = std::max(widest, (b - a) / 2);
  }
  if (rounds.empty()) {
    *uncertainty_s = 0;
    return 0;
  }
  if (lo <= hi) {
    *uncertainty_s = (hi - lo) / 2;
    return (lo + hi) / 2;
  }
  *uncertainty_s = widest;
  return median(mids);
}

namespace {

// Which boot of which kernel this is: the steady clock (CLOCK_MONOTONIC) counts from that
// boot, so two processes with the same one read the same clock, in one namespace or another.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

constexpr int kClockRounds = 16;
constexpr double kClockDelaySeconds = 200e-6;

}  // namespace

Status clock_offset(Driver& d, double* offset_s) {
  ControlPlane& c = d.control();
  const Topology& topo = d.topology();
  *offset_s = 0;
  std::string id = boot_id();
  ZB_RETURN_IF_ERROR(c.broadcast(&id, Wait::barrier, "rank 0's clock, for the clock offsets"));
  // Per node: whether its first rank reads another clock than rank 0's.
  const bool leader = topo.local_rank == 0;
  std::vector<double> apart(size_t(topo.nodes), 0.0);
  if (leader && !id.empty() && id != boot_id()) apart[size_t(topo.node)] = 1;
  ZB_RETURN_IF_ERROR(c.sum(&apart, Wait::reduction, "which machines read another clock"));
  if (std::none_of(apart.begin(), apart.end(), [](double a) { return a > 0; })) return Status::ok();
  // Rounds in which rank 0 or the other machines' first ranks come last by turns, so that
  // both ends of the bounds get close to the moment rank 0 answered.
  const bool measured = leader && apart[size_t(topo.node)] > 0;
  std::vector<double> times(size_t(4 * kClockRounds * topo.nodes), 0.0);
  for (int r = 0; r < kClockRounds; ++r) {
    ZB_RETURN_IF_ERROR(c.barrier(Wait::barrier, "clock offset rounds"));
    const bool late = (r % 2 == 0) ? d.rank() == 0 : measured;
    if (late) std::this_thread::sleep_for(std::chrono::duration<double>(kClockDelaySeconds));
    const double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(c.barrier(Wait::barrier, "clock offset rounds"));
    const double t1 = now_seconds();
    const size_t at = size_t(4 * (kClockRounds * topo.node + r));
    if (d.rank() == 0) times[at] = t0, times[at + 1] = t1;
    if (measured) times[at + 2] = t0, times[at + 3] = t1;
  }
  ZB_RETURN_IF_ERROR(c.sum(&times, Wait::reduction, "the clock offset rounds' times"));
  std::vector<double> offsets(size_t(topo.nodes), 0.0);
  if (measured) {
    std::vector<ClockRound> rounds;
    for (int r = 0; r < kClockRounds; ++r) {
      const size_t mine = size_t(4 * (kClockRounds * topo.node + r)), hub = size_t(4 * r);
      rounds.push_back({times[hub], times[hub + 1], times[mine + 2], times[mine + 3]});
    }
    double uncertainty = 0;
    offsets[size_t(topo.node)] = clock_offset_from(rounds, &uncertainty);
  }
  ZB_RETURN_IF_ERROR(c.sum(&offsets, Wait::reduction, "each machine's clock offset"));
  *offset_s = offsets[size_t(topo.node)];
  return Status::ok();
}

double shared_origin(Driver& d, double start_s, double offset_s) {
  return -d.max_over_ranks(-(start_s + offset_s)) - offset_s;
}

Status draw_median_step(Driver& d, const std::function<Status(int)>& before,
                        const std::function<Status(TraceCandidate*)>& run, const std::function<Status()>& finish,
                        TraceCandidate* drawn, std::string* tried) {
  std::vector<TraceCandidate> candidates(kTraceCandidates);
  for (int k = 0; k < kTraceCandidates; ++k) {
    TraceCandidate& c = candidates[size_t(k)];
    ZB_RETURN_IF_ERROR(before(k));
    c.first = d.comm().traffic().size();
    c.start_s = now_seconds();
    ZB_RETURN_IF_ERROR(run(&c));
    c.end = d.comm().traffic().size();
  }
  ZB_RETURN_IF_ERROR(finish());
  // The same reduced values on every rank, so the same choice; ties to the earlier step.
  std::vector<std::pair<double, int>> slowest;
  tried->clear();
  for (int k = 0; k < kTraceCandidates; ++k) {
    slowest.push_back({d.max_over_ranks(candidates[size_t(k)].exposed_s), k});
    char us[32];
    std::snprintf(us, sizeof us, "%s%.3f", k ? ", " : "", slowest.back().first * 1e6);
    *tried += us;
  }
  std::sort(slowest.begin(), slowest.end());
  *drawn = std::move(candidates[size_t(slowest[slowest.size() / 2].second)]);
  return Status::ok();
}

Status last_issues(Driver& d, const std::vector<CollRecord>& log, double offset_s, LastIssue* out) {
  // On rank 0's clock; a collective whose issue time was not recorded counts as never late.
  std::vector<double> at(log.size());
  for (size_t i = 0; i < log.size(); ++i) at[i] = log[i].issued_s >= 0 ? log[i].issued_s + offset_s : -INFINITY;
  std::vector<double> last = at;
  ZB_RETURN_IF_ERROR(d.control().max(&last, Wait::reduction, "when the last rank issued each collective"));
  // The latest rank's index (the highest of equal times).
  std::vector<double> who(log.size());
  for (size_t i = 0; i < log.size(); ++i) who[i] = at[i] == last[i] ? d.rank() : -1;
  ZB_RETURN_IF_ERROR(d.control().max(&who, Wait::reduction, "which rank issued each collective last"));
  // The first rank to finish each: the latest of the negated ends, on rank 0's clock.
  std::vector<double> first(log.size());
  for (size_t i = 0; i < log.size(); ++i) first[i] = log[i].end_s >= 0 ? -(log[i].end_s + offset_s) : -INFINITY;
  ZB_RETURN_IF_ERROR(d.control().max(&first, Wait::reduction, "when the first rank finished each collective"));
  out->at_s.resize(log.size());
  out->rank.resize(log.size());
  out->late_finish_s.assign(log.size(), 0.0);
  for (size_t i = 0; i < log.size(); ++i) {
    out->at_s[i] = last[i] - offset_s;  // back on this rank's clock
    out->rank[i] = int(who[i]);
    if (log[i].end_s >= 0 && std::isfinite(first[i]))
      out->late_finish_s[i] = std::max(0.0, log[i].end_s + offset_s + first[i]);
  }
  return Status::ok();
}

namespace {

// The wait's split, with when the last rank issued what it waited for (none: all wire).
WaitSplit split(const WaitRecord& w, const LastIssue& last, int* late_rank) {
  const bool known = w.awaits >= 0 && size_t(w.awaits) < last.at_s.size();
  *late_rank = known ? last.rank[size_t(w.awaits)] : -1;
  const bool finish_known = known && size_t(w.awaits) < last.late_finish_s.size();
  return split_wait(w, known ? last.at_s[size_t(w.awaits)] : -INFINITY,
                    finish_known ? last.late_finish_s[size_t(w.awaits)] : 0.0);
}

}  // namespace

StepCause step_cause(const std::vector<WaitRecord>& waits, const LastIssue& last) {
  StepCause c;
  double largest = 0;
  for (const WaitRecord& w : waits) {
    int late = -1;
    const WaitSplit s = split(w, last, &late);
    c.exposed_s += s.skew_s + s.wire_s;
    c.skew_s += s.skew_s;
    c.wire_s += s.wire_s;
    c.late_finish_s += s.late_finish_s;
    if (s.skew_s > largest) largest = s.skew_s, c.late_rank = late;
  }
  return c;
}

ExposedByCause exposed_by_cause(const std::vector<std::vector<StepCause>>& steps) {
  ExposedByCause out;
  std::vector<double> skew, wire, late_finish;
  std::map<int, int> late;
  for (const auto& ranks : steps) {
    if (ranks.empty()) continue;
    // The rank that waited longest: the first of equals.
    size_t worst = 0;
    for (size_t r = 1; r < ranks.size(); ++r)
      if (ranks[r].exposed_s > ranks[worst].exposed_s) worst = r;
    skew.push_back(ranks[worst].skew_s);
    wire.push_back(ranks[worst].wire_s);
    late_finish.push_back(ranks[worst].late_finish_s);
    if (ranks[worst].late_rank >= 0) ++late[ranks[worst].late_rank];
  }
  if (skew.empty()) return out;
  out.skew_s = median(skew);
  out.wire_s = median(wire);
  out.late_finish_s = median(late_finish);
  int most = 0;
  for (const auto& [rank, count] : late)
    if (count > most) most = count, out.late_rank = rank;
  return out;
}

Status gather_exposed_by_cause(Driver& d, const std::vector<std::vector<WaitRecord>>& my_steps,
                               const LastIssue& last, ExposedByCause* out) {
  // Each rank fills its own slots of one vector, summed over ranks: five values per step.
  constexpr size_t kValues = 5;
  const size_t steps = my_steps.size(), ranks = size_t(d.size());
  std::vector<double> all(steps * ranks * kValues, 0.0);
  for (size_t s = 0; s < steps; ++s) {
    const StepCause c = step_cause(my_steps[s], last);
    double* at = &all[(s * ranks + size_t(d.rank())) * kValues];
    at[0] = c.exposed_s, at[1] = c.skew_s, at[2] = c.wire_s, at[3] = c.late_rank, at[4] = c.late_finish_s;
  }
  ZB_RETURN_IF_ERROR(d.control().sum(&all, Wait::reduction, "every rank's waits by cause"));
  std::vector<std::vector<StepCause>> by_step(steps, std::vector<StepCause>(ranks));
  for (size_t s = 0; s < steps; ++s)
    for (size_t r = 0; r < ranks; ++r) {
      const double* at = &all[(s * ranks + r) * kValues];
      by_step[s][r] = {at[0], at[1], at[2], int(at[3]), at[4]};
    }
  *out = exposed_by_cause(by_step);
  return Status::ok();
}

void split_wait_spans(const std::vector<WaitRecord>& waits, const LastIssue& last, std::vector<TraceSpan>* spans) {
  spans->erase(std::remove_if(spans->begin(), spans->end(), [](const TraceSpan& s) { return s.track == Track::wait; }),
               spans->end());
  for (const WaitRecord& w : waits) {
    int late = -1;
    const WaitSplit s = split(w, last, &late);
    const std::string awaits = w.awaits >= 0 ? "\"awaits\": " + std::to_string(w.awaits) + ", " : "";
    const std::string late_arg = ", \"late_rank\": " + std::to_string(late);
    if (s.skew_s > 0)
      spans->push_back({"wait for rank " + std::to_string(late), Track::wait, w.start_s, w.start_s + s.skew_s,
                        awaits + "\"part\": \"skew\"" + late_arg});
    if (s.wire_s > 0 || s.skew_s == 0)
      spans->push_back({"wait for the wire", Track::wait, w.start_s + s.skew_s, w.end_s,
                        awaits + "\"part\": \"wire\"" + late_arg});
  }
}

}  // namespace zb
