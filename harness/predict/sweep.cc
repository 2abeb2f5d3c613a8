// Reading a sweep: Google Benchmark's JSON through nlohmann/json, one model per collective.
#include "harness/predict/sweep.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "harness/core/parse.h"

namespace zb {
namespace {

double seconds_per_unit(const std::string& unit) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1.0;
  return 0;
}

}  // namespace

Status Sweep::load(const std::string& path, Sweep* out) {
  std::ifstream in(path);
  if (!in) return Status::error("--sweep: cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Google Benchmark writes a counter that is not a number as a bare NaN or Infinity, which
  // JSON has no word for; none of them is a value the predictor reads.
  text = std::regex_replace(text, std::regex(R"(: (-?Infinity|NaN)([,\n}]))"), ": null$2");
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    return Status::error("--sweep: " + path + " is not Google Benchmark JSON of zb_collectives");
  Sweep s;
  const nlohmann::json& ctx = doc.value("context", nlohmann::json::object());
  int64_t ranks = 0;
  if (!ctx.contains("world_size") || !ctx["world_size"].is_string() ||
      !parse_int(ctx["world_size"].get<std::string>(), &ranks) || ranks < 1)
    return Status::error("--sweep: " + path + " does not say its rank count (context.world_size)");
  s.ranks_ = int(ranks);
  std::string cmd = ctx.contains("command_line") && ctx["command_line"].is_string() ? ctx["command_line"].get<std::string>() : "";
  s.description_ = (cmd.find("--timing=per-iter") != std::string::npos ? "per-iter" : "batch") +
                   std::string(", progress ") +
                   (cmd.find("--progress=thread") != std::string::npos ? "thread" : "caller");
  // Per benchmark: its median aggregate, else the times of its runs.
  std::map<std::string, std::vector<double>> runs;
  std::map<std::string, double> medians;
  for (const auto& b : doc["benchmarks"]) {
    if (!b.is_object() || !b.contains("real_time") || !b["real_time"].is_number()) continue;
    if (b.value("error_occurred", false)) continue;
    std::string name = b.value("run_name", b.value("name", ""));
    name = name.substr(0, name.find("/iterations:"));
    double t = b["real_time"].get<double>() * seconds_per_unit(b.value("time_unit", "ns"));
    if (b.value("run_type", "iteration") == "aggregate") {
      if (b.value("aggregate_name", "") == "median") medians[name] = t;
    } else {
      runs[name].push_back(t);
    }
  }
  for (auto& [name, t] : medians) runs[name] = {t};
  std::map<std::tuple<int, int, std::string>, std::vector<SweepPoint>> points;
  for (const auto& [name, times] : runs) {
    std::vector<std::string> parts = split(name, '/');
    Coll op;
    if (parts.empty() || !parse_coll(parts[0], &op)) continue;
    uint64_t bytes = 0;
    DType dtype = DType::bf16;
    std::string group = "world";
    for (size_t i = 1; i < parts.size(); ++i) {
      std::string key = parts[i].substr(0, parts[i].find(':')), value = parts[i].substr(parts[i].find(':') + 1);
      if (key == "bytes") parse_bytes(value, &bytes);
      else if (key == "dtype") parse_dtype(value, &dtype);
      else if (key == "group") group = value;
    }
    double sum = 0;
    for (double t : times) sum += t;
    if (bytes > 0) points[{int(op), int(dtype), group}].push_back({double(bytes), sum / double(times.size())});
  }
  if (points.empty()) return Status::error("--sweep: " + path + " holds no collective benchmarks");
  for (auto& [key, pts] : points) ZB_RETURN_IF_ERROR(CollModel::fit(pts, &s.models_[key]));
  *out = std::move(s);
  return Status::ok();
}

const CollModel* Sweep::find(Coll op, DType dtype, const std::string& group) const {
  auto it = models_.find({int(op), int(dtype), group});
  return it == models_.end() ? nullptr : &it->second;
}

}  // namespace zb
