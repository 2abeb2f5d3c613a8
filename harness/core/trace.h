// Trace: spans of one step on a compute and a communication track per rank, written as a
// Chrome trace (opens in Perfetto); on GPU the compute spans are also NVTX ranges.
#pragma once

#include <string>
#include <vector>

#include "harness/core/status.h"

namespace zb {

// Per rank: compute spans, communication spans, and the waits of compute for communication
// (the exposed communication, measured where it happens), and a copy engine's jobs.
enum class Track { compute = 0, comm = 1, wait = 2, copy = 3 };

struct TraceSpan {
  std::string name;
  Track track;
  double start_s, end_s;  // steady clock
  std::string args;       // JSON object members, e.g. "\"layer\": 3"
};

class Trace {
 public:
  bool enabled() const { return enabled_; }
  void enable(bool on) { enabled_ = on; }
  void add(TraceSpan span) {
    if (enabled_) spans_.push_back(std::move(span));
  }
  std::vector<TraceSpan>& spans() { return spans_; }
  void clear() { spans_.clear(); }

 private:
  bool enabled_ = false;
  std::vector<TraceSpan> spans_;
};

// Marks a compute span: NVTX range on GPU builds, and a TraceSpan when tracing is on.
class TraceScope {
 public:
  TraceScope(Trace* trace, std::string name, std::string args = "");
  ~TraceScope();

 private:
  Trace* trace_;
  std::string name_, args_;
  double start_;
};

// PATH for one stage (or other variant); PATH with _<name> before the extension for several.
std::string per_stage_path(const std::string& path, const std::string& name, size_t count);

// One rank's part of a Chrome trace: its track names and spans, times relative to its
// `origin_s`, as the events of process `rank` (pid = rank, tid 0 = compute, 1 =
// communication, 2 = compute waiting for communication, 3 = the copy engine); `rank_args`
// (JSON object members) land in the args of the rank's process.
std::string chrome_trace_events(const std::vector<TraceSpan>& spans, double origin_s, int rank,
                                const std::string& rank_args = "");

// Writes every rank's events (in rank order, as the driver gathered them) as one Chrome
// trace; `metadata` (JSON object members) lands in a top-level "zerobench" object.
Status write_chrome_trace(const std::string& path, const std::vector<std::string>& rank_events,
                          const std::string& metadata);

}  // namespace zb
