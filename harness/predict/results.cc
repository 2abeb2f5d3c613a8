// Reading Google Benchmark JSON through nlohmann/json.
#include "harness/predict/results.h"

#include <algorithm>
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
  return unit == "s" ? 1.0 : 0.0;
}

// The numeric fields of a benchmark row that are its counters (and its time, in seconds).
std::map<std::string, double> counters(const nlohmann::json& b) {
  static const char* kStandard[] = {"family_index", "per_family_instance_index", "repetitions",
                                    "repetition_index", "threads", "iterations", "real_time", "cpu_time"};
  std::map<std::string, double> out;
  for (const auto& [key, value] : b.items()) {
    if (!value.is_number()) continue;
    bool standard = false;
    for (const char* s : kStandard) standard = standard || key == s;
    if (!standard) out[key] = value.get<double>();
  }
  if (b.contains("real_time") && b["real_time"].is_number())
    out["real_time_s"] = b["real_time"].get<double>() * seconds_per_unit(b.value("time_unit", "ns"));
  return out;
}

}  // namespace

std::map<std::string, std::string> name_segments(const std::string& name, std::string* head) {
  std::map<std::string, std::string> out;
  const std::vector<std::string> parts = split(name, '/');
  *head = parts.empty() ? "" : parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t colon = parts[i].find(':');
    out[parts[i].substr(0, colon)] = colon == std::string::npos ? "" : parts[i].substr(colon + 1);
  }
  return out;
}

Status load_results(const std::string& path, const std::string& what, Results* out) {
  std::ifstream in(path);
  if (!in) return Status::error(what + ": cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Google Benchmark writes a counter that is not a number as a bare NaN or Infinity, which
  // JSON has no word for; they are left out like any value that is not a number.
  text = std::regex_replace(text, std::regex(R"(: (-?Infinity|NaN)([,\n}]))"), ": null$2");
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    return Status::error(what + ": " + path + " is not Google Benchmark JSON");
  Results r;
  if (doc.contains("context") && doc["context"].is_object())
    for (const auto& [key, value] : doc["context"].items()) {
      if (value.is_string()) r.context[key] = value.get<std::string>();
      else if (value.is_number()) r.context[key] = value.dump();
    }
  std::map<std::string, std::vector<std::map<std::string, double>>> runs;
  std::map<std::string, std::map<std::string, double>> medians;
  for (const auto& b : doc["benchmarks"]) {
    if (!b.is_object() || b.value("error_occurred", false)) continue;
    std::string name = b.value("run_name", b.value("name", ""));
    name = name.substr(0, name.find("/iterations:"));
    if (b.value("run_type", "iteration") == "aggregate") {
      if (b.value("aggregate_name", "") == "median") medians[name] = counters(b);
    } else {
      runs[name].push_back(counters(b));
    }
  }
  for (const auto& [name, rows] : runs) {
    std::map<std::string, std::vector<double>> values;
    for (const auto& row : rows)
      for (const auto& [key, v] : row) values[key].push_back(v);
    for (auto& [key, v] : values) {
      std::sort(v.begin(), v.end());
      r.benchmarks[name][key] = v[(v.size() - 1) / 2];
    }
  }
  for (const auto& [name, row] : medians) r.benchmarks[name] = row;
  *out = std::move(r);
  return Status::ok();
}

}  // namespace zb
