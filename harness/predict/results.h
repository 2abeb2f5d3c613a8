// Google Benchmark results read back: per benchmark, each counter (and the time) as the file
// summarises it, for the predictor's inputs (a sweep) and its check (a measured step).
#pragma once

#include <map>
#include <string>

#include "harness/core/status.h"

namespace zb {

struct Results {
  std::map<std::string, std::string> context;
  // Benchmark name (without Google Benchmark's /iterations:... suffix) -> counter -> value.
  // "real_time_s" is the time in seconds. The median over repetitions: the file's median
  // aggregate where it has one, else each counter's median over the runs, the lower of the
  // two middle values where their count is even. A stalled repetition does not move it.
  // Counters that are not numbers are left out.
  std::map<std::string, std::map<std::string, double>> benchmarks;
};

// `what` names the input in errors ("--sweep").
Status load_results(const std::string& path, const std::string& what, Results* out);

// A benchmark name's parts: the first ("all_reduce", "quantize") in `head`, then each
// "key:value" segment after it ("bytes" -> "65536"; a segment without a colon maps to "").
std::map<std::string, std::string> name_segments(const std::string& name, std::string* head);

}  // namespace zb
