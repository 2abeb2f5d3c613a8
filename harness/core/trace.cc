// Trace: span collection and Chrome trace JSON.
#include "harness/core/trace.h"

#include <cstdio>
#include <vector>

#include "harness/core/clock.h"
#include "harness/core/files.h"

#ifdef ZB_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace zb {

TraceScope::TraceScope(Trace* trace, std::string name, std::string args)
    : trace_(trace && trace->enabled() ? trace : nullptr), name_(std::move(name)),
      args_(std::move(args)), start_(now_seconds()) {
#ifdef ZB_HAVE_CUDA
  nvtxRangePushA(name_.c_str());
#endif
}

TraceScope::~TraceScope() {
#ifdef ZB_HAVE_CUDA
  nvtxRangePop();
#endif
  if (trace_) trace_->add({name_, Track::compute, start_, now_seconds(), args_});
}

std::string per_stage_path(const std::string& path, const std::string& name, size_t count) {
  if (path.empty() || count == 1) return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + "_" + name;
  return path.substr(0, dot) + "_" + name + path.substr(dot);
}

static std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string chrome_trace_events(const std::vector<TraceSpan>& spans, double origin_s, int rank,
                                const std::string& rank_args) {
  std::string mine;
  auto event = [&](const std::string& body) { mine += (mine.empty() ? "" : ",\n") + body; };
  char buf[160];
  const char* threads[] = {"compute", "communication", "compute waits for communication", "copy engine"};
  for (int tid = 0; tid < 4; ++tid) {
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                  "\"args\": {\"name\": \"%s\"}}", rank, tid, threads[tid]);
    event(buf);
  }
  std::snprintf(buf, sizeof buf, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                "\"args\": {\"name\": \"rank %d\"", rank, rank);
  event(buf + (rank_args.empty() ? "" : ", " + rank_args) + "}}");
  for (const auto& s : spans) {
    std::snprintf(buf, sizeof buf, "\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f",
                  rank, int(s.track), (s.start_s - origin_s) * 1e6, (s.end_s - s.start_s) * 1e6);
    event("{\"name\": \"" + escape(s.name) + "\", " + buf + ", \"args\": {" + s.args + "}}");
  }
  return mine;
}

Status write_chrome_trace(const std::string& path, const std::vector<std::string>& rank_events,
                          const std::string& metadata) {
  std::string json = "{\"displayTimeUnit\": \"ms\", \"zerobench\": {" + metadata +
                     "},\n\"traceEvents\": [\n";
  for (size_t r = 0; r < rank_events.size(); ++r) json += (r ? ",\n" : "") + rank_events[r];
  json += "\n]}\n";
  return write_file_atomically(path, json);
}

}  // namespace zb
