// Trace: spans of one step on a compute and a communication track per rank, written as a
// Chrome trace (opens in Perfetto); on GPU the compute spans are also NVTX ranges.
#pragma once

#include <mpi.h>

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

// Gathers every rank's spans to rank 0 and writes them, times relative to each rank's
// `origin_s`, as one Chrome trace: pid = rank, tid 0 = compute, 1 = communication, 2 =
// compute waiting for communication. `metadata` (JSON object members) lands in a top-level
// "zerobench" object; `rank_args` (JSON object members) in the args of the rank's process.
Status write_chrome_trace(const std::string& path, const std::vector<TraceSpan>& spans,
                          double origin_s, MPI_Comm comm, const std::string& metadata,
                          const std::string& rank_args = "");

}  // namespace zb
