// The zb_collectives benchmark body: one op at one size, timed back to back (or per
// iteration) against the bare library call, every element checked, wire bytes measured.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/driver/driver.h"

namespace zb {

// What one benchmark runs: a library collective, or (hier, with all_reduce) the hierarchical
// all-reduce built from three: a reduce-scatter within each node, an all-reduce of each rank's
// block across nodes, an all-gather within the node. Only 1/S of the vector then leaves the
// node per rank, where a flat ring sends its whole 2(N-1)/N out of each node once.
struct CollOp {
  Coll op = Coll::all_reduce;
  bool hier = false;
  bool operator==(const CollOp&) const = default;
};
const char* coll_op_name(const CollOp& op);  // "all_reduce", ..., "hier_all_reduce"
std::vector<std::pair<std::string, CollOp>> coll_op_choices();

struct CollSetup {
  Coll op = Coll::all_reduce;
  bool hier = false;      // the hierarchical all-reduce (op is all_reduce)
  Group group = Group::world;  // the ranks the collective runs over (a node's, or a cross-node group)
  DType dtype = DType::bf16;
  uint64_t bytes = 0;     // requested full buffer; padded up for all but the all-reduce
  bool batch = true;      // false: each iteration completed and timed alone (p50, p99)
  bool bare = true;       // also time the bare library call
  bool check = true;
  bool measurable = false;  // the transport is sockets, so written bytes are wire bytes
  // Also time --iters collectives each completed before the next is issued, the whole timed
  // once (serial_s): what a step that waits for each collective pays per collective, the
  // hand-off to the waiter included, without the rank skew per-iteration maxima add up.
  bool serial = false;
  // With serial: each of those collectives issued after this long idle (every rank leaves a
  // barrier, then sleeps), as after a layer's compute, and timed alone: what it costs once
  // the communication thread and the cores have gone idle (serial_idle_s). 0: not timed.
  double serial_idle_s = 0;
  // Each call a different part of buffers this large in all (0: the same buffers every call):
  // the whole buffer in place, the input out of place (its output one buffer, reused).
  uint64_t footprint = 0;
  // The result over the input (nccl-tests' in-place form: CollRecord::in_place); not for the
  // all-to-all or the hierarchical all-reduce.
  bool in_place = false;
};

struct CollResult {
  uint64_t bytes = 0, count = 0;  // the full buffer as run (padded)
  double time_s = 0, bare_s = NAN, serial_s = NAN, serial_idle_s = NAN, algbw = 0, busbw = 0, wrong = 0;
  double wire_formula = 0, wire_measured = NAN;
  // Per iteration, the busiest node: bytes to other nodes (and among its ranks) by the ring
  // formula of the op, and as its counters saw them (NaN where no launcher names them).
  double inter_formula = 0, inter_measured = NAN, intra_formula = 0, intra_measured = NAN;
  // Per iteration, the minor page faults the busiest process took over the same stretch (every
  // thread of it): a timed call that meets fresh pages times the kernel providing them.
  double page_faults = 0;
  // The buffers each rank's calls cycled through: one call's (--footprint 0), or the spread.
  double footprint_bytes = 0;
  // Untimed calls issued before the warm-up, every slot used twice (slots x 2).
  double primed_calls = 0;
};

// The full buffer a size becomes: whole elements, and for reduce-scatter, all-gather and
// all-to-all a multiple of the rank count so every rank holds (or sends each rank) an equal
// block (the hierarchical all-reduce: a multiple of the ranks per node, `ranks` then being
// those).
uint64_t padded_count(Coll op, DType dtype, uint64_t bytes, int ranks, bool hier = false);

Status run_collective_benchmark(Run& run, const CollSetup& setup, CollResult* out);

}  // namespace zb
