// Reading nccl-tests' -J output. Its layout (version 3, nccl-tests 2.19): an object with "args"
// (the command line, the program first), "config" (nthreads, ngpus, and "devices", one entry
// per process with its "hostname"), and "results": per size a record with "size" (bytes, the
// larger of the send and receive buffers: the full buffer), "type", and "out_of_place" and
// "in_place" objects whose "time" (or "cpu_time" under -C) is microseconds per iteration, or
// the string "nan".
#include "harness/predict/nccl_tests.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace zb {
namespace {

nlohmann::json parse(const std::string& text) { return nlohmann::json::parse(text, nullptr, false); }

bool op_of_program(const std::string& arg0, Coll* op) {
  const std::string base = arg0.substr(arg0.find_last_of('/') + 1);
  for (const auto& [name, c] : {std::pair<const char*, Coll>{"all_reduce_perf", Coll::all_reduce},
                                {"reduce_scatter_perf", Coll::reduce_scatter},
                                {"all_gather_perf", Coll::all_gather}})
    if (base.rfind(name, 0) == 0) return *op = c, true;
  return false;
}

// Microseconds of one side ("out_of_place", "in_place") of a record; NaN when absent.
double side_us(const nlohmann::json& rec, const char* side) {
  if (!rec.contains(side) || !rec[side].is_object()) return NAN;
  const nlohmann::json& s = rec[side];
  for (const char* key : {"time", "cpu_time"})
    if (s.contains(key) && s[key].is_number()) return s[key].get<double>();
  return NAN;
}

}  // namespace

bool is_nccl_tests_json(const std::string& text) {
  nlohmann::json doc = parse(text);
  return !doc.is_discarded() && doc.is_object() && doc.contains("results") && doc.contains("config");
}

Status read_nccl_tests(const std::string& path, std::vector<NcclTestsRun>* out) {
  std::ifstream in(path);
  if (!in) return Status::error("--sweep: cannot read " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json doc = parse(text);
  const std::string at = "--sweep: " + path + ": ";
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    return Status::error(at + "not nccl-tests' JSON (-J): no \"results\" list");
  Coll op = Coll::all_reduce;
  const nlohmann::json& args = doc.value("args", nlohmann::json::array());
  if (!args.is_array() || args.empty() || !args[0].is_string() || !op_of_program(args[0].get<std::string>(), &op))
    return Status::error(at + "written by " + (args.is_array() && !args.empty() ? args[0].dump() : "an unnamed program") +
                         ", not all_reduce_perf, reduce_scatter_perf or all_gather_perf");
  const nlohmann::json& config = doc.value("config", nlohmann::json::object());
  const nlohmann::json& devices = config.value("devices", nlohmann::json::array());
  const int threads = config.value("nthreads", 0), gpus = config.value("ngpus", 0);
  if (!devices.is_array() || devices.empty() || threads < 1 || gpus < 1)
    return Status::error(at + "config has no devices, nthreads or ngpus, so its rank count is unknown");
  std::set<std::string> hosts;
  for (const auto& dev : devices)
    if (dev.is_object()) hosts.insert(dev.value("hostname", ""));
  // Per element type, per size: each record's faster form, then the median over -N repeats
  // (the lower middle of an even count), as a zb_collectives sweep's repetitions are priced.
  std::map<std::string, std::map<double, std::vector<double>>> times;
  for (const auto& rec : doc["results"]) {
    if (!rec.is_object() || !rec.contains("size") || !rec["size"].is_number()) continue;
    const double bytes = rec["size"].get<double>();
    double us = std::fmin(side_us(rec, "out_of_place"), side_us(rec, "in_place"));  // fmin skips a NaN
    if (!(bytes > 0)) continue;
    if (!std::isfinite(us) || us < 0)
      return Status::error(at + "the " + rec.value("type", "") + " record of " + std::to_string(uint64_t(bytes)) +
                           " bytes has no time");
    times[rec.value("type", "")][bytes].push_back(us * 1e-6);
  }
  if (times.empty()) return Status::error(at + "holds no results");
  out->clear();
  for (auto& [type, sizes] : times) {
    NcclTestsRun r;
    r.op = op;
    r.type = type;
    r.ranks = int(devices.size()) * threads * gpus;
    r.nodes = int(hosts.size());
    for (auto& [bytes, repeats] : sizes) {
      std::sort(repeats.begin(), repeats.end());
      r.points.push_back({bytes, repeats[(repeats.size() - 1) / 2]});
    }
    out->push_back(r);
  }
  return Status::ok();
}

}  // namespace zb
