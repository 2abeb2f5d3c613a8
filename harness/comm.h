// Communicator: the collectives of data-parallel training, issued asynchronously on a stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <mpi.h>

#include "harness/device.h"
#include "harness/status.h"
#include "harness/traffic.h"
#include "kernels/dtype.h"

namespace zb {

enum class Backend { mpi, nccl };
const char* backend_name(Backend b);

// A point in the communication stream: complete once everything issued before it is.
struct Event {
  uint64_t seq = 0;
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
};

// Counts for the three collectives (all in elements):
//   allReduce:     `count` in, `count` out.
//   reduceScatter: `send` holds size() * recv_count; each rank keeps its recv_count block.
//   allGather:     each rank gives send_count; `recv` holds size() * send_count.
// Buffers live where memKind() says (host for mpi, device for nccl). Each call only
// queues work; record()/wait() complete it. A wait that outlasts the timeout returns an
// error naming the collective, its size and the rank that waited.
class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual Backend backend() const = 0;
  virtual MemKind memKind() const = 0;
  virtual std::string libraryVersion() const = 0;

  Status allReduce(const void* send, void* recv, size_t count, DType dtype);
  Status reduceScatter(const void* send, void* recv, size_t recv_count, DType dtype);
  Status allGather(const void* send, void* recv, size_t send_count, DType dtype);
  // Blocks until every rank arrives; ordered after all collectives issued before it.
  virtual Status barrier() = 0;

  virtual Status record(Event* event) = 0;
  // The host waits (bounded by the timeout, so a lost collective becomes an error).
  virtual Status wait(const Event& event) = 0;
  // Ordering between the compute engine and the communication stream, only where the data
  // needs it. `compute_stream` is Compute::stream() (a cudaStream_t; null on CPU).
  //   afterCompute:  collectives issued from now on start once the compute work queued so
  //                  far has finished (they read what it wrote, or overwrite what it reads);
  //   computeAfter:  compute queued from now on starts once `event` is complete.
  // nccl: CUDA events between the two streams; the host does not block. mpi: CPU compute
  // has finished when its call returns, so afterCompute has nothing to order and
  // computeAfter is the host's wait().
  virtual Status afterCompute(void* compute_stream) = 0;
  virtual Status computeAfter(const Event& event, void* compute_stream) = 0;
  Status synchronize();

  // Every collective issued is appended here (the accounting side of volume checks).
  TrafficLog& traffic() { return traffic_; }
  void setFaults(const FaultPlan& faults) { faults_ = faults; }
  // Reads the socket write counter around every collective (mpi backend), so the log holds
  // a measured size per collective. Off by default: the read costs a few microseconds.
  void setMeasureWire(bool on) { measure_wire_ = on; }
  double timeoutSeconds() const { return timeout_s_; }

 protected:
  Communicator(int rank, int size, double timeout_s)
      : rank_(rank), size_(size), timeout_s_(timeout_s) {}
  // `log_index` is the collective's entry in traffic(), for the backend's measurement.
  virtual Status issue(const CollRecord& op, const void* send, void* recv, size_t log_index) = 0;
  // "rank 1: all_reduce of 4194304 bytes (bf16)": the context every error carries.
  std::string describe(const CollRecord& op) const;

  const FaultPlan& faults() const { return faults_; }

  int rank_, size_;
  double timeout_s_;
  bool measure_wire_ = false;

 private:
  Status submit(Coll op, const void* send, void* recv, size_t count, DType dtype);
  TrafficLog traffic_;
  FaultPlan faults_;
  int64_t calls_ = 0;
};

// Backends. `world` is duplicated, so the communicator's traffic never mixes with the
// driver's own reductions.
Status make_mpi_communicator(MPI_Comm world, double timeout_s, std::unique_ptr<Communicator>* out);
Status make_nccl_communicator(MPI_Comm world, double timeout_s,
                              std::unique_ptr<Communicator>* out);

// auto -> nccl when this build has CUDA and a device is visible, else mpi.
Status resolve_backend(const std::string& flag, Backend* out);

}  // namespace zb
