// Traffic: the log of collectives issued, their ideal ring wire bytes, and bytes measured
// at the transport by the kernel rather than by our own arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/clock.h"
#include "harness/core/dtype.h"
#include "harness/core/trace.h"

namespace zb {

enum class Coll { all_reduce, reduce_scatter, all_gather, all_to_all };
const char* coll_name(Coll op);
bool parse_coll(const std::string& text, Coll* out);
std::vector<std::pair<std::string, Coll>> coll_choices();  // every op by name, for flags

// The ranks a collective runs over: all of them, the ranks of this rank's node, or the ranks
// at this rank's place on every node (one per node). Made once from the Topology.
enum class Group { world, node, cross };
const char* group_name(Group group);

// One collective as issued. `count` is the full buffer in elements: the all-reduce's
// vector, the reduce-scatter's input, the all-gather's output, the all-to-all's send buffer
// (which its receive buffer equals) (the nccl-tests convention).
struct CollRecord {
  Coll op;
  uint64_t count;
  DType dtype;
  // Socket bytes this process wrote while the collective ran; -1 when not measured.
  int64_t wire_measured = -1;
  // When it was issued, and when it ran (steady-clock seconds; -1 when the backend did not
  // say), for the trace.
  double issued_s = -1, start_s = -1, end_s = -1;
  Group group = Group::world;
  int ranks = 0;  // of its group, as the communicator issued it; 0: not recorded
  // Its result over its input (nccl-tests' in-place form): an all-reduce into its own buffer, a
  // reduce-scatter into the rank's block of its input, an all-gather from the rank's block of
  // its output. A step's buckets reduce so; a library may then skip a copy.
  bool in_place = false;
  // Recording backend only: an earlier collective of the same step used part of this one's
  // full buffer (a slot the step cycles through), so its data is in the caches even in the
  // round with communication alone, where no compute writes it.
  bool reused_buffer = false;
  // Recording backend only: the distinct bytes the step's collectives read or wrote from the last
  // one that used this one's buffer (in place its whole buffer, out of place its input) to this
  // one, both included: the buffer's reuse distance, as zb_collectives --footprint sets a spread
  // call's. 0: no collective used the buffer before.
  uint64_t reuse_bytes = 0;
  uint64_t bytes() const { return count * dtype_size(dtype); }
};

// "all_gather 4.0 MiB (bf16)": a collective's name in traces and messages.
std::string collective_label(const CollRecord& rec);

// nccl-tests' bus-bandwidth factors: 2(N-1)/N for all-reduce, (N-1)/N for the others.
double busbw_factor(Coll op, int ranks);
// Bytes one rank sends under a ring algorithm: busbw_factor x full buffer bytes. The
// all-to-all sends each other rank its block directly, (N-1)/N of the buffer too.
double ideal_wire_bytes(Coll op, uint64_t bytes, int ranks);
// Elements of the full vector a collective counts for, the way the ZeRO paper counts
// volume: an all-reduce is a reduce-scatter plus an all-gather, so it counts twice. An
// all-to-all counts once, as the reduce-scatter it stands in for in qgZ: each rank sends the
// same (N-1)/N of its buffer.
double volume_elements(const CollRecord& rec);

// Appended by the issuing thread, measurements filled in by the communication thread.
class TrafficLog {
 public:
  size_t add(const CollRecord& rec);
  // Filled in by the backend when the collective completes.
  void complete(size_t index, int64_t wire_bytes, double start_s, double end_s);
  void clear();
  // Room for `count` records, its memory already touched, so appending that many in a timed
  // loop neither reallocates nor faults in a page.
  void reserve(size_t count);
  std::vector<CollRecord> records() const;
  CollRecord record(size_t index) const;
  size_t size() const;
  double volume_elements() const;
  // Each collective over its own group's size; `ranks` for records that carry none.
  double ideal_wire_bytes(int ranks) const;
  // The measured side of volume: each collective's socket bytes divided by the ring's
  // (N-1)/N and its element size, summed. NaN if any collective went unmeasured, or ran over a
  // single rank (which sends nothing, so its volume cannot be read off the wire).
  double measured_volume_elements(int ranks) const;

 private:
  mutable std::mutex mu_;
  std::vector<CollRecord> records_;
};

// Each timed collective of `log` from entry `first` up to `end` (excluded), as a span of the
// communication track: its label, its log entry ("log", what a wait's "awaits" names),
// `args(i)` (the schedule's own members for entry i, JSON object members), its bytes and when
// it was issued relative to `origin_s` ("issued_us"). Collectives the backend did not time
// (NCCL: see Nsight) are left out.
void add_comm_spans(Trace& trace, const TrafficLog& log, size_t first, double origin_s,
                    const std::function<std::string(size_t)>& args, size_t end = SIZE_MAX);

// Bytes this process has handed to write()/writev() so far (`wchar` in /proc/self/io):
// over a socket transport that is exactly what a rank puts on the wire. Returns -1 when
// the counter cannot be read.
int64_t process_write_bytes();

// Whether the backend's data goes through sockets, so process_write_bytes() measures it.
// mpi: Open MPI restricted to the tcp BTL (OMPI_MCA_btl=tcp,self or ^vader/^sm) or a
// single rank; gloo: always (its TCP transport, within a node too); nccl: NCCL's socket
// transport (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE and NCCL_NET=Socket all set). Anything else
// moves data through memory the kernel never sees.
bool socket_transport(const std::string& backend, int ranks, std::string* why_not);

}  // namespace zb
