// Reading a sweep: one model per collective, dtype and group, from its Google Benchmark results.
#include "harness/predict/sweep.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/parse.h"
#include "harness/core/stats.h"
#include "harness/predict/results.h"

namespace zb {

Status Sweep::load(const std::string& path, Sweep* out) {
  Results results;
  ZB_RETURN_IF_ERROR(load_results(path, "--sweep", &results));
  Sweep s;
  int64_t ranks = 0;
  if (!parse_int(results.context["world_size"], &ranks) || ranks < 1)
    return Status::error("--sweep: " + path + " does not say its rank count (context.world_size)");
  s.ranks_ = int(ranks);
  const std::string& cmd = results.context["command_line"];
  s.description_ = (cmd.find("--timing=per-iter") != std::string::npos ? "per-iter" : "batch") +
                   std::string(", progress ") +
                   (cmd.find("--progress=thread") != std::string::npos ? "thread" : "caller");
  std::map<std::tuple<int, int, std::string>, std::vector<SweepPoint>> points;
  std::map<std::tuple<int, int, std::string>, std::vector<double>> handoffs;  // per size
  // Each collective at its fastest repetition, as zb_zero takes comm_s at its fastest round:
  // jitter only adds time (a descheduled rank; on a shaped link a dropped packet's 200 ms
  // retransmission timeout, which one repetition of three met at 256 KiB here).
  for (const auto& [name, summary] : results.benchmarks) {
    auto fast = results.fastest.find(name);  // absent where the file holds aggregates only
    const std::map<std::string, double>& counters = fast != results.fastest.end() ? fast->second : summary;
    std::vector<std::string> parts = split(name, '/');
    Coll op;
    if (parts.empty() || !parse_coll(parts[0], &op) || !counters.count("real_time_s")) continue;
    uint64_t bytes = 0;
    DType dtype = DType::bf16;
    std::string group = "world";
    for (size_t i = 1; i < parts.size(); ++i) {
      size_t colon = parts[i].find(':');
      std::string key = parts[i].substr(0, colon), value = colon == std::string::npos ? "" : parts[i].substr(colon + 1);
      if (key == "bytes") parse_bytes(value, &bytes);
      else if (key == "dtype") parse_dtype(value, &dtype);
      else if (key == "group") group = value;
    }
    if (bytes == 0) continue;
    points[{int(op), int(dtype), group}].push_back({double(bytes), counters.at("real_time_s")});
    auto waited = counters.find("serial_s");
    if (waited != counters.end() && std::isfinite(waited->second))
      handoffs[{int(op), int(dtype), group}].push_back(waited->second - counters.at("real_time_s"));
  }
  if (points.empty()) return Status::error("--sweep: " + path + " holds no collective benchmarks");
  for (auto& [key, pts] : points) ZB_RETURN_IF_ERROR(CollModel::fit(pts, &s.models_[key]));
  for (auto& [key, diffs] : handoffs) s.handoff_[key] = std::max(0.0, median(diffs));
  if (!s.handoff_.empty()) s.description_ += ", serial_s for the hand-off";
  *out = std::move(s);
  return Status::ok();
}

const CollModel* Sweep::find(Coll op, DType dtype, const std::string& group) const {
  auto it = models_.find({int(op), int(dtype), group});
  return it == models_.end() ? nullptr : &it->second;
}

double Sweep::handoff_s(Coll op, DType dtype, const std::string& group) const {
  auto it = handoff_.find({int(op), int(dtype), group});
  return it == handoff_.end() ? 0.0 : it->second;
}

}  // namespace zb
