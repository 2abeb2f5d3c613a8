// The zb_collectives benchmark body: one op at one size, timed back to back (or per
// iteration) against the bare library call, every element checked, wire bytes measured.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/comm/traffic.h"
#include "harness/driver/driver.h"

namespace zb {

struct CollSetup {
  Coll op = Coll::all_reduce;
  DType dtype = DType::bf16;
  uint64_t bytes = 0;     // requested full buffer; padded up for reduce-scatter and all-gather
  bool batch = true;      // false: each iteration completed and timed alone (p50, p99)
  bool bare = true;       // also time the bare library call
  bool check = true;
  bool measurable = false;  // the transport is sockets, so written bytes are wire bytes
};

struct CollResult {
  uint64_t bytes = 0, count = 0;  // the full buffer as run (padded)
  double time_s = 0, bare_s = NAN, algbw = 0, busbw = 0, wrong = 0;
  double wire_ideal = 0, wire_measured = NAN;
};

// The full buffer a size becomes: whole elements, and for reduce-scatter and all-gather a
// multiple of the rank count so every rank holds an equal block.
uint64_t padded_count(Coll op, DType dtype, uint64_t bytes, int ranks);

Status run_collective_benchmark(Run& run, const CollSetup& setup, CollResult* out);

}  // namespace zb
