// Reading a sweep: zb_collectives results or nccl-tests' JSON, one series per collective,
// dtype and group, each with the rank count and tier it was measured at.
#include "harness/predict/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "harness/core/parse.h"
#include "harness/core/stats.h"
#include "harness/predict/nccl_tests.h"
#include "harness/predict/results.h"

namespace zb {

const char* tier_name(Tier t) { return t == Tier::intra ? "intra-node" : "inter-node"; }

bool same_collective(const SweepSeries& a, const SweepSeries& b) {
  return a.op == b.op && a.dtype == b.dtype && a.group == b.group && a.in_place == b.in_place &&
         a.ranks == b.ranks && a.tier == b.tier;
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct FileShape {
  int ranks = 0, nodes = 1;
  int host_cores = 0;  // a CPU backend's cores per node; 0: the collectives ran on devices
};

// A group's size and tier in a world of `shape`.
void place(const std::string& group, const FileShape& shape, SweepSeries* s) {
  const int per_node = shape.ranks / shape.nodes;
  if (group == "node") s->ranks = per_node, s->tier = Tier::intra;
  else if (group == "cross") s->ranks = shape.nodes, s->tier = Tier::inter;
  else s->ranks = shape.ranks, s->tier = shape.nodes > 1 ? Tier::inter : Tier::intra;
}

Status load_zb_collectives(const std::string& path, std::vector<SweepSeries>* out, FileShape* shape,
                           std::string* description, std::vector<double>* references) {
  Results results;
  ZB_RETURN_IF_ERROR(load_results(path, "--sweep", &results));
  int64_t ranks = 0, nodes = 1;
  if (!parse_int(results.context["world_size"], &ranks) || ranks < 1)
    return Status::error("--sweep: " + path + " does not say its rank count (context.world_size)");
  if (!parse_int(results.context["nodes"], &nodes) || nodes < 1 || ranks % nodes != 0) nodes = 1;
  shape->ranks = int(ranks), shape->nodes = int(nodes);
  // On a CPU backend the ranks' communication shares the node's cores with their compute.
  int64_t cpus = 0;
  const std::string& backend = results.context["backend"];
  if ((backend == "mpi" || backend == "gloo") && parse_int(results.context["num_cpus"], &cpus) && cpus > 0)
    shape->host_cores = int(cpus);
  const std::string& cmd = results.context["command_line"];
  *description = "zb_collectives " + std::string(cmd.find("--timing=per-iter") != std::string::npos ? "per-iter" : "batch") +
                 ", progress " + (cmd.find("--progress=thread") != std::string::npos ? "thread" : "caller");
  // By op, dtype, group, placement (out of place first) and footprint (one buffer first).
  using Key = std::tuple<int, std::string, std::string, bool, uint64_t>;
  std::map<Key, SweepSeries> by_key;
  std::map<Key, std::vector<double>> handoffs, wakes;  // per size
  double idle_us = 0;  // what --serial-idle-us said
  const size_t at = cmd.find("--serial-idle-us=");
  if (at != std::string::npos) idle_us = std::atof(cmd.c_str() + at + 17);
  // Each collective at its median repetition, as zb_zero's results give the median of their
  // repetitions: a stalled one (a descheduled rank; on a shaped link a dropped packet's 200 ms
  // retransmission timeout, which one repetition of three met at 256 KiB here) does not move
  // it. Priced from the fastest of three instead, every stage's comm_s came out 0.5 to 8
  // points shorter on the same files, against zb_zero's median (docs/measurements.md).
  for (const auto& [name, counters] : results.benchmarks) {
    std::string head;
    std::map<std::string, std::string> seg = name_segments(name, &head);
    Coll op;
    if (!parse_coll(head, &op) || !counters.count("real_time_s")) continue;
    auto reference = counters.find("reference_s");
    if (reference != counters.end() && std::isfinite(reference->second)) references->push_back(reference->second);
    uint64_t bytes = 0;
    if (seg.count("bytes")) parse_bytes(seg["bytes"], &bytes);
    const std::string dtype = seg.count("dtype") ? seg["dtype"] : "bf16";
    const std::string group = seg.count("group") ? seg["group"] : "world";
    const bool in_place = seg.count("placement") && seg["placement"] == "in";
    uint64_t footprint = 0;
    if (seg.count("footprint")) parse_bytes(seg["footprint"], &footprint);
    if (bytes == 0) continue;
    const Key key{int(op), dtype, group, in_place, footprint};
    SweepSeries& s = by_key[key];
    s.op = op, s.dtype = dtype, s.group = group, s.in_place = in_place, s.footprint = footprint, s.file = path;
    place(group, *shape, &s);
    s.points.push_back({double(bytes), counters.at("real_time_s")});
    auto waited = counters.find("serial_s");
    if (waited != counters.end() && std::isfinite(waited->second))
      handoffs[key].push_back(waited->second - counters.at("real_time_s"));
    auto idled = counters.find("serial_idle_s");
    if (waited != counters.end() && idled != counters.end() && std::isfinite(idled->second) && idle_us > 0)
      wakes[key].push_back(idled->second - waited->second);
  }
  for (auto& [key, s] : by_key) {
    auto h = handoffs.find(key);
    // The hand-off back to a waiting thread does not grow with the size, and one size's
    // difference of two noisy times is noise; the median over sizes is not.
    if (h != handoffs.end()) s.handoff_s = std::max(0.0, median(h->second));
    // Waking likewise: a cost per collective, whatever its size.
    auto w = wakes.find(key);
    if (w != wakes.end()) s.wake_s = std::max(0.0, median(w->second)), s.wake_after_s = idle_us * 1e-6;
    out->push_back(std::move(s));
  }
  if (!handoffs.empty()) *description += ", serial_s for the hand-off";
  if (!wakes.empty()) *description += ", serial_idle_s for waking after " + std::to_string(std::lround(idle_us)) + " us idle";
  return Status::ok();
}

Status load_nccl_tests(const std::string& path, std::vector<SweepSeries>* out, FileShape* shape,
                       std::string* description) {
  std::vector<NcclTestsRun> runs;
  ZB_RETURN_IF_ERROR(read_nccl_tests(path, &runs));
  shape->ranks = runs.front().ranks;
  shape->nodes = runs.front().nodes > 0 && runs.front().ranks % runs.front().nodes == 0 ? runs.front().nodes : 1;
  *description = std::string("nccl-tests ") + coll_name(runs.front().op);
  for (const NcclTestsRun& r : runs) {
    SweepSeries s;
    s.op = r.op, s.group = "world", s.file = path, s.points = r.points;
    s.dtype = r.type == "float" ? "fp32" : r.type == "bfloat16" ? "bf16" : r.type;
    place("world", *shape, &s);
    out->push_back(std::move(s));
  }
  return Status::ok();
}

HostReference host_reference(const std::vector<double>& times) {
  HostReference r;
  r.benchmarks = int(times.size());
  if (times.empty()) return r;
  r.median_s = median(times);
  for (double t : times) r.off += same_host_speed(t, r.median_s) ? 0 : 1;
  return r;
}

}  // namespace

bool same_host_speed(double a_s, double b_s) {
  return a_s > 0 && b_s > 0 && std::max(a_s, b_s) <= kHostChangedRatio * std::min(a_s, b_s);
}

double fastest_host_speed(const std::vector<double>& times) {
  if (times.empty()) return NAN;
  const double fastest = *std::min_element(times.begin(), times.end());
  std::vector<double> near;
  for (double t : times)
    if (same_host_speed(t, fastest)) near.push_back(t);
  return median(near);
}

bool repetition_at_fastest_speed(double before_s, double after_s, double fastest_s) {
  return same_host_speed(before_s, after_s) && same_host_speed(std::max(before_s, after_s), fastest_s);
}

Status Sweep::from_series(std::vector<SweepSeries> series, int ranks, int nodes, double handoff_s, Sweep* out) {
  Sweep s;
  s.ranks_ = ranks, s.nodes_ = std::max(1, nodes), s.default_handoff_s_ = handoff_s;
  for (SweepSeries& x : series) {
    ZB_RETURN_IF_ERROR(CollModel::fit(x.points, &x.model));
    s.series_.push_back(std::move(x));
  }
  *out = std::move(s);
  return Status::ok();
}

Status Sweep::load(const std::string& paths, double handoff_s, Sweep* out) {
  std::vector<SweepSeries> all;
  std::vector<double> references;
  std::string description;
  FileShape first;
  for (const std::string& path : split(paths, ',')) {
    if (path.empty()) return Status::error("--sweep: an empty file name in '" + paths + "'");
    std::vector<SweepSeries> got;
    FileShape shape;
    std::string what;
    if (is_nccl_tests_json(read_text(path))) ZB_RETURN_IF_ERROR(load_nccl_tests(path, &got, &shape, &what));
    else ZB_RETURN_IF_ERROR(load_zb_collectives(path, &got, &shape, &what, &references));
    if (got.empty()) return Status::error("--sweep: " + path + " holds no collective benchmarks");
    for (const SweepSeries& g : got)
      for (const SweepSeries& a : all)
        if (same_collective(a, g) && a.footprint == g.footprint)
          return Status::error("--sweep: " + path + " and " + a.file + " both time " + coll_name(g.op) + " of " +
                               g.dtype + (g.in_place ? " in place" : "") +
                               (g.footprint ? " spread over " + std::to_string(g.footprint) + " bytes" : "") +
                               " over " + std::to_string(g.ranks) + " ranks " + tier_name(g.tier) +
                               "; give one of them");
    if (all.empty()) first = shape;
    description += (description.empty() ? "" : "; ") + what;
    all.insert(all.end(), got.begin(), got.end());
  }
  Sweep s;
  ZB_RETURN_IF_ERROR(from_series(std::move(all), first.ranks, first.nodes, handoff_s, &s));
  s.description_ = description;
  s.host_cores_ = first.host_cores;
  s.reference_ = host_reference(references);
  *out = std::move(s);
  return Status::ok();
}

const SweepSeries* Sweep::find(Coll op, DType dtype, int ranks, Tier tier, const std::string& group,
                               bool in_place) const {
  const SweepSeries* best = nullptr;
  auto score = [&](const SweepSeries& s) {
    return (s.dtype == dtype_name(dtype) ? 8 : 0) + (s.in_place == in_place ? 4 : 0) + (s.group == group ? 2 : 0) +
           (s.footprint == 0 ? 1 : 0);
  };
  for (const SweepSeries& s : series_)
    if (s.op == op && s.ranks == ranks && s.tier == tier && (!best || score(s) > score(*best))) best = &s;
  return best;
}

std::vector<const SweepSeries*> Sweep::spreads_of(const SweepSeries& warm) const {
  std::vector<const SweepSeries*> out;
  if (warm.footprint > 0) return out;
  for (const SweepSeries& s : series_)
    if (s.footprint > 0 && same_collective(s, warm)) out.push_back(&s);
  std::sort(out.begin(), out.end(), [](const SweepSeries* x, const SweepSeries* y) { return x->footprint < y->footprint; });
  return out;
}

double Sweep::handoff_s(Coll op) const {
  for (bool in_place : {false, true})
    for (const SweepSeries& s : series_)
      if (s.op == op && s.in_place == in_place && s.handoff_s >= 0) return s.handoff_s;
  return default_handoff_s_;
}

const SweepSeries* Sweep::woken(Coll op) const {
  for (bool in_place : {false, true})
    for (const SweepSeries& s : series_)
      if (s.op == op && s.in_place == in_place && s.wake_s >= 0) return &s;
  return nullptr;
}

bool Sweep::handoff_defaulted() const {
  for (const SweepSeries& s : series_) {
    bool measured = false;
    for (const SweepSeries& t : series_) measured = measured || (t.op == s.op && t.handoff_s >= 0);
    if (!measured) return true;
  }
  return false;
}

}  // namespace zb
