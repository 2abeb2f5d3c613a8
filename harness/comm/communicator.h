// Communicator: the collectives of data-parallel training, issued asynchronously on a stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/comm/topology.h"
#include "harness/comm/traffic.h"
#include "harness/core/device.h"
#include "harness/core/dtype.h"
#include "harness/core/status.h"

namespace zb {

// record: no data moved; the schedule is logged (harness/comm/recorder.h).
enum class Backend { mpi, nccl, gloo, record };
const char* backend_name(Backend b);
// Whether this build has the gloo backend (Gloo was found at configure time).
bool gloo_built();

// A point in the communication stream: complete once everything issued before it is.
struct Event {
  uint64_t seq = 0;
  // Entries in traffic() when it was recorded (-1: none): the last collective it covers is
  // entry log_end - 1, which a trace names as what a wait waited for.
  int64_t log_end = -1;
};

// Test-only faults, so the tests can prove that failures are caught rather than hidden.
struct FaultPlan {
  int skip_rank = -1;      // this rank silently skips its `skip_call`-th collective
  int64_t skip_call = -1;
  int corrupt_rank = -1;   // benchmarks corrupt one input element on this rank
  // Every collective of this op takes `slow_fraction` longer (the backend busy-waits that
  // share of its own duration after it): a planted regression for the A/B tooling.
  int slow_op = -1;        // a Coll value, -1 for none
  double slow_fraction = 0;
  // Every full step of this stage takes `slow_stage_fraction` longer (zb_zero busy-waits that
  // share of the step's own duration after it): a planted regression of one stage's step.
  int slow_stage = -1;     // a Stage value, -1 for none
  double slow_stage_fraction = 0;
  // This rank sleeps `late_s` at the end of every full step (zb_zero): a straggler that the
  // other ranks meet at their first blocking wait of the next step.
  int late_rank = -1;
  double late_s = 0;
};

// Who makes a collective progress on a CPU backend. `thread`: a communication thread per
// rank plays the stream, so the caller computes while collectives run (what overlap needs).
// `caller`: each collective runs to completion inside the call that issues it, as a bare
// library call would; for code that waits at once anyway (the collective sweep, serialised
// steps), where a hand-off to a thread would only add its cost to what is measured.
// GPU backends ignore it: the GPU is the progress engine.
enum class Progress { thread, caller };

// Counts for the four collectives (all in elements):
//   all_reduce:     `count` in, `count` out.
//   reduce_scatter: `send` holds size() * recv_count; each rank keeps its recv_count block.
//   all_gather:     each rank gives send_count; `recv` holds size() * send_count.
//   all_to_all:     `send` and `recv` hold size() * block_count each: block p of `send` goes
//                   to rank p, block p of `recv` comes from rank p. Out of place only (NCCL's
//                   send/receive pairs cannot work in place): the buffers must not overlap.
// Each runs over a Group (default the world): size() and rank() are then the group's own,
// group_size() and group_rank(); blocks are in the group's rank order. All groups share one
// stream, so collectives over different groups complete in the order they were issued.
// Buffers live where mem_kind() says (host for mpi, device for nccl). Each call only
// queues work; record()/wait() complete it. A wait that outlasts the timeout returns an
// error naming the collective, its size and the rank that waited.
class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual Backend backend() const = 0;
  virtual MemKind mem_kind() const = 0;
  virtual std::string library_version() const = 0;

  int group_size(Group group) const { return groups_[int(group)].size; }
  int group_rank(Group group) const { return groups_[int(group)].rank; }

  Status all_reduce(const void* send, void* recv, size_t count, DType dtype, Group group = Group::world);
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                        Group group = Group::world);
  Status all_gather(const void* send, void* recv, size_t send_count, DType dtype, Group group = Group::world);
  Status all_to_all(const void* send, void* recv, size_t block_count, DType dtype,
                    Group group = Group::world);
  // Blocks until every rank arrives; ordered after all collectives issued before it.
  virtual Status barrier() = 0;

  virtual Status record(Event* event) = 0;
  // The host waits (bounded by the timeout, so a lost collective becomes an error).
  virtual Status wait(const Event& event) = 0;
  // Ordering between the compute engine and the communication stream, only where the data
  // needs it. `compute_stream` is Compute::stream() (a cudaStream_t; null on CPU).
  //   comm_waits_for_compute: collectives issued from now on start once the compute work
  //       queued so far has finished (they read what it wrote, or overwrite what it reads);
  //   compute_waits_for: compute queued from now on starts once `event` is complete.
  // nccl: CUDA events between the two streams; the host does not block. mpi: CPU compute
  // has finished when its call returns, so comm_waits_for_compute has nothing to order and
  // compute_waits_for is the host's wait().
  virtual Status comm_waits_for_compute(void* compute_stream) = 0;
  virtual Status compute_waits_for(const Event& event, void* compute_stream) = 0;
  Status synchronize();

  // See Progress. Waits for everything in flight before switching.
  virtual Status set_progress(Progress progress) = 0;

  // The library's own call with nothing of ours around it (no log, no queue, no events),
  // issued on the calling thread (mpi) or on the communicator's stream (nccl), then
  // bare_synchronize(): the baseline zerobench's own cost is measured against. Same counts
  // as the methods above (`count` the full buffer); the communicator must be idle
  // (synchronized) first.
  virtual Status bare(Coll op, const void* send, void* recv, size_t count, DType dtype,
                      Group group = Group::world) = 0;
  virtual Status bare_synchronize() = 0;

  // Ends the job when a collective the caller runs itself (Progress::caller) outlasts the
  // timeout; called from another thread, since the caller is stuck inside the library. The
  // default prints the error and calls MPI_Abort; the driver installs its own abort.
  void set_timeout_handler(std::function<void(const Status&)> handler) {
    timeout_handler_ = std::move(handler);
  }

  // Every collective issued is appended here (the accounting side of volume checks).
  TrafficLog& traffic() { return traffic_; }
  void set_faults(const FaultPlan& faults) { faults_ = faults; }
  // Reads the socket write counter around every collective (mpi backend), so the log holds
  // a measured size per collective. Off by default: the read costs a few microseconds.
  void set_measure_wire(bool on) { measure_wire_ = on; }
  // Records when each collective was issued, started and ended (for traces). Off by default:
  // the clock reads cost a measurable share of a small collective.
  void set_record_times(bool on) { record_times_ = on; }

 protected:
  Communicator(int rank, int size, double timeout_s);
  // Each group's rank and size for this rank, from the topology the backend split by.
  void set_groups(const Topology& topo);
  // `log_index` is the collective's entry in traffic(), for the backend's measurement.
  virtual Status issue(const CollRecord& op, const void* send, void* recv, size_t log_index) = 0;
  // "rank 1: all_reduce of 4194304 bytes (bf16)": the context every error carries.
  std::string describe(const CollRecord& op) const;
  // "timeout: <what> did not complete within 300 s (<cause>)": both backends' timeout error.
  // The cause, when not given: a rank skipped or never reached the collective.
  Status timeout_error(const std::string& what, const std::string& cause = "") const;
  const FaultPlan& faults() const { return faults_; }

  int rank_, size_;
  struct Place {
    int rank = 0, size = 1;
  };
  Place groups_[3];  // by Group
  double timeout_s_;
  bool measure_wire_ = false, record_times_ = false;
  std::function<void(const Status&)> timeout_handler_;

 private:
  Status submit(Coll op, const void* send, void* recv, size_t count, DType dtype, Group group);
  TrafficLog traffic_;
  FaultPlan faults_;
  int64_t calls_ = 0;
};

// What a backend that connects its own ranks (nccl, gloo) needs of the driver's control plane:
// every rank's blob on every rank, in rank order, and a barrier, each bounded by the timeout
// and named by `what` when it is not met; and the address this rank reaches rank 0 from ("" when
// the control plane does not know: MPI).
struct Bootstrap {
  std::function<Status(const std::string& mine, std::vector<std::string>* all, const std::string& what)>
      exchange;
  std::function<Status(const std::string& what)> barrier;
  std::string address;
};

// Backends, each with communicators of its own, so its traffic never mixes with the driver's;
// the node and cross-node groups are made once, as `topo` places the ranks. mpi: `world`
// duplicated, the groups split from it (MPI_Comm_split); nccl: the world's communicator from a
// unique id that `boot` hands out (or NCCL_COMM_ID names), the groups by ncclCommSplit; gloo:
// a full mesh of TCP pairs per group, whose addresses `boot` exchanges.
Status make_mpi_communicator(MPI_Comm world, const Topology& topo, double timeout_s,
                             std::unique_ptr<Communicator>* out);
Status make_nccl_communicator(const Topology& topo, double timeout_s, const Bootstrap& boot,
                              std::unique_ptr<Communicator>* out);
Status make_gloo_communicator(const Topology& topo, double timeout_s, const Bootstrap& boot,
                              std::unique_ptr<Communicator>* out);

// auto -> nccl when this build has CUDA and a device is visible; else mpi when an MPI launcher
// started the process (or none did: MPI's singleton), gloo when it was started from the
// environment. `mpi_launch` says which; `launcher` names it in messages.
Status resolve_backend(const std::string& flag, bool mpi_launch, const std::string& launcher,
                       Backend* out);

}  // namespace zb
