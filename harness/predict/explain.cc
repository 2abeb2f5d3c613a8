// Lining a predicted step up against a measured trace, op by op in program order.
#include "harness/predict/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

namespace zb {

Status read_measured_step(const std::string& path, int rank, MeasuredStep* out) {
  std::ifstream in(path);
  if (!in) return Status::error("--explain: cannot read the measured trace " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return Status::error("--explain: " + path + " is not a zerobench Chrome trace");
  // The rank that waited longest, from each process's exposed_us.
  std::map<int, double> exposed;
  for (const auto& e : doc["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" && e.contains("args"))
      exposed[e.value("pid", 0)] = e["args"].value("exposed_us", 0.0) * 1e-6;
  if (exposed.empty()) return Status::error("--explain: " + path + " holds no rank");
  if (rank < 0)
    rank = std::max_element(exposed.begin(), exposed.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  MeasuredStep m;
  m.rank = rank;
  if (doc.contains("zerobench") && doc["zerobench"].is_object())
    m.comm_only = doc["zerobench"].value("round", "step") == "comm";
  m.exposed_s = exposed[rank];
  std::vector<MeasuredStep::Wait> parts;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("pid", -1) != rank) continue;
    const double t0 = e.value("ts", 0.0) * 1e-6, t1 = t0 + e.value("dur", 0.0) * 1e-6;
    const nlohmann::json args = e.value("args", nlohmann::json::object());
    const std::string name = e.value("name", "");
    switch (e.value("tid", -1)) {
      case 0:
        m.compute.push_back({name, t0, t1});
        break;
      case 1:
        m.colls.push_back({name, args.value("log", int64_t(-1)), args.value("issued_us", t0 * 1e6) * 1e-6, t0, t1,
                           args.value("bytes", 0.0), args.value("in_place", false)});
        break;
      case 2: {
        MeasuredStep::Wait w{args.value("awaits", int64_t(-1)), t0, t1};
        if (args.value("part", "") == "skew") w.skew_s = t1 - t0, w.late_rank = args.value("late_rank", -1);
        parts.push_back(w);
        break;
      }
      default: break;
    }
  }
  auto by_start = [](const auto& a, const auto& b) { return a.start_s < b.start_s; };
  std::stable_sort(m.compute.begin(), m.compute.end(), by_start);
  std::stable_sort(parts.begin(), parts.end(), by_start);
  std::stable_sort(m.colls.begin(), m.colls.end(), [](const auto& a, const auto& b) { return a.issue_s < b.issue_s; });
  // A wait's skew part and its wire part abut: one wait.
  for (const MeasuredStep::Wait& w : parts) {
    if (!m.waits.empty() && m.waits.back().awaits == w.awaits && std::fabs(m.waits.back().end_s - w.start_s) < 1e-8 &&
        m.waits.back().skew_s > 0 && w.skew_s == 0) {
      m.waits.back().end_s = w.end_s;
      continue;
    }
    m.waits.push_back(w);
  }
  *out = std::move(m);
  return Status::ok();
}

namespace {

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s * 1e3);
  return buf;
}

}  // namespace

Explanation explain(const std::vector<OpTiming>& predicted, const MeasuredStep& m, double handoff_s,
                    const StepPrediction* whole) {
  Explanation x;
  std::vector<const OpTiming*> compute, issues, waits;
  for (const OpTiming& op : predicted) {
    if (op.kind == ScheduleOp::Kind::compute && op.what != "idle") compute.push_back(&op);
    if (op.kind == ScheduleOp::Kind::issue) issues.push_back(&op);
    if (op.kind == ScheduleOp::Kind::wait) waits.push_back(&op);
  }
  for (size_t i = 0; i < std::min(compute.size(), m.compute.size()); ++i)
    x.compute_s += (m.compute[i].end_s - m.compute[i].start_s) - (compute[i]->end_s - compute[i]->start_s);
  // Collectives in issue order; a measured log entry and a predicted number become the k-th
  // of the step, which is how waits name what they wait for.
  std::map<int64_t, size_t> k_of_log;
  std::map<uint64_t, size_t> k_of_seq;
  const size_t colls = std::min(issues.size(), m.colls.size());
  std::string table = "# collective  op  bytes  predicted: issued  start  ms  measured: issued  start  ms\n";
  double prev_end = -INFINITY;
  // Per op (the name's first word) and placement: how much longer, over how many, measured over
  // predicted. On CPUs the caches part an op's two placements (z1's gathers in place, z3's not).
  struct OpSum {
    double measured = 0, predicted = 0;
    int count = 0;
  };
  std::map<std::string, OpSum> by_op;
  for (size_t k = 0; k < colls; ++k) {
    const OpTiming& p = *issues[k];
    const MeasuredStep::Coll& c = m.colls[k];
    k_of_log[c.log] = k, k_of_seq[p.seq] = k;
    x.collective_s += (c.end_s - c.start_s) - (p.end_s - p.start_s);
    OpSum& o = by_op[c.name.substr(0, c.name.find(' ')) + (c.in_place ? " in place" : "")];
    o.measured += c.end_s - c.start_s, o.predicted += p.end_s - p.start_s, ++o.count;
    x.late_start_s += std::max(0.0, c.start_s - std::max(c.issue_s, prev_end));
    prev_end = c.end_s;
    table += "  " + std::to_string(k) + "  " + c.name + "  " + ms(p.issue_s) + "  " + ms(p.start_s) + "  " +
             ms(p.end_s - p.start_s) + "  |  " + ms(c.issue_s) + "  " + ms(c.start_s) + "  " + ms(c.end_s - c.start_s) + "\n";
  }
  // Waits: each measured one against the next predicted wait for the same collective.
  table += "# wait for collective  predicted: start  ms  measured: start  ms  (skew  wire)\n";
  size_t next = 0;
  for (const MeasuredStep::Wait& w : m.waits) {
    auto k = k_of_log.find(w.awaits);
    const int64_t want = k == k_of_log.end() ? -1 : int64_t(k->second);
    const OpTiming* p = nullptr;
    for (size_t j = next; j < waits.size() && !p; ++j) {
      auto pk = k_of_seq.find(waits[j]->seq);
      if ((pk == k_of_seq.end() ? -1 : int64_t(pk->second)) == want) p = waits[j], next = j + 1;
    }
    const double dur = w.end_s - w.start_s, pdur = p ? p->end_s - p->start_s : 0;
    x.exposed_measured_s += dur;
    x.skew_s += w.skew_s;
    // A wait that outlasted its collective's end: woken that much after it.
    if (want >= 0 && dur > 0 && m.colls[size_t(want)].end_s > w.start_s)
      x.handoff_s += std::max(0.0, w.end_s - m.colls[size_t(want)].end_s) - (pdur > 0 ? handoff_s : 0.0);
    if (dur < 1e-6 && pdur == 0) continue;  // neither side waited: not worth a line
    table += "  " + (want >= 0 ? std::to_string(want) : std::string("(an earlier step's)")) + "  " +
             (p ? ms(p->start_s) : "-") + "  " + ms(pdur) + "  |  " + ms(w.start_s) + "  " + ms(dur) + "  (" +
             ms(w.skew_s) + "  " + ms(dur - w.skew_s) + ")\n";
  }
  for (const OpTiming* p : waits) x.exposed_predicted_s += p->end_s - p->start_s;
  if (whole) x.exposed_predicted_s = whole->exposed_s, x.skew_s -= whole->skew_wait_s;
  x.table = table;
  // The causes, largest first; the collectives' split by op, the largest difference first.
  std::vector<std::pair<std::string, OpSum>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& a, auto& b) {
    return std::fabs(a.second.measured - a.second.predicted) > std::fabs(b.second.measured - b.second.predicted);
  });
  std::string per_op;
  for (const auto& [op, o] : ops) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", o.predicted > 0 ? o.measured / o.predicted : NAN);
    per_op += std::string(per_op.empty() ? " (" : ", ") + op + " " + ms(o.measured - o.predicted) + " ms over " +
              std::to_string(o.count) + " at " + ratio;
  }
  if (!per_op.empty()) per_op += ")";
  std::vector<std::pair<double, std::string>> causes = {
      {x.compute_s, "compute the replay does not model (measured compute minus --compute's)"},
      {x.collective_s, "collectives longer on the stream than the sweep's times" + per_op},
      {x.late_start_s, "collectives that started after they were issued and the stream was free"},
      {x.skew_s, "waits for a late rank to issue"},
      {x.handoff_s, "wake-ups after a blocking wait's collective beyond the modelled hand-off"}};
  std::stable_sort(causes.begin(), causes.end(), [](auto& a, auto& b) { return std::fabs(a.first) > std::fabs(b.first); });
  x.causes = "exposed: measured " + ms(x.exposed_measured_s) + " ms, predicted " + ms(x.exposed_predicted_s) +
             " ms, rank " + std::to_string(m.rank) + "; largest differences:";
  for (size_t i = 0; i < 3; ++i) x.causes += std::string(i ? ";" : "") + " " + ms(causes[i].first) + " ms " + causes[i].second;
  return x;
}

}  // namespace zb
