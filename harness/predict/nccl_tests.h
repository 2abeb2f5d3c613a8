// nccl-tests' results read as a sweep: the JSON that all_reduce_perf, reduce_scatter_perf and
// all_gather_perf (2.19) write with -J, as its own src/util.cu writes it.
#pragma once

#include <string>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"
#include "harness/predict/coll_model.h"

namespace zb {

struct NcclTestsRun {
  Coll op = Coll::all_reduce;  // from the program that wrote it (args[0])
  std::string type;            // nccl-tests' element type ("float", "bfloat16", ...)
  int ranks = 0;               // processes (config.devices) x threads x GPUs per thread
  int nodes = 0;               // distinct host names among config.devices
  // Per size (the "size" column: the full buffer, as zerobench counts it), the faster of the
  // out-of-place and in-place times and of any repeats (-N), in seconds.
  std::vector<SweepPoint> points;
};

// Every run in the file (one per element type with -d all). Fails with one line naming the
// file and what is wrong: not JSON, not nccl-tests' (no "results"), a program other than the
// three, no rank count, a time that is not a number.
Status read_nccl_tests(const std::string& path, std::vector<NcclTestsRun>* out);
// Whether the parsed document looks like nccl-tests' -J output (a "results" list and a "config").
bool is_nccl_tests_json(const std::string& text);

}  // namespace zb
