// NCCL backend: device buffers, one CUDA stream for communication, one GPU per rank chosen
// by the launcher's local rank, bootstrapped by NCCL itself from a unique id that rank 0 hands
// out over the driver's control plane (or that NCCL_COMM_ID names), so it needs no MPI; the
// node and cross-node groups are split from the world's communicator with ncclCommSplit. Kept
// thin: everything above is shared.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/topology.h"

namespace zb {
namespace {

ncclDataType_t nccl_type(DType d) { return d == DType::bf16 ? ncclBfloat16 : ncclFloat32; }

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const Bootstrap& boot, const ncclComm_t comms[3], cudaStream_t stream,
                   cudaEvent_t compute_done, const Topology& topo, double timeout_s)
      : Communicator(topo.rank, topo.size, timeout_s), barrier_(boot.barrier), comm_(comms[0]),
        stream_(stream), compute_done_(compute_done) {
    for (int g = 0; g < 3; ++g) comms_[g] = comms[g];
    set_groups(topo);
  }

  ~NcclCommunicator() override {
    for (auto& m : marks_) cudaEventDestroy(m.done);
    for (auto e : spare_) cudaEventDestroy(e);
    cudaEventDestroy(compute_done_);
    for (int g = 2; g >= 1; --g) ncclCommDestroy(comms_[g]);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  Backend backend() const override { return Backend::nccl; }
  MemKind mem_kind() const override { return MemKind::device; }
  std::string library_version() const override {
    int v = 0;
    ncclGetVersion(&v);
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }

  // The stream drained, then every rank meets on the control plane (whose wait is bounded).
  Status barrier() override {
    ZB_RETURN_IF_ERROR(synchronize());
    return barrier_("the nccl communicator's barrier");
  }

  // A CUDA event is recorded only here, when someone asks for a point in the stream, not
  // after every collective: a back-to-back sweep then launches exactly what the bare
  // library call does.
  Status record(Event* event) override {
    event->seq = issued_;
    event->log_end = int64_t(traffic().size());
    if (issued_ == 0 || (!marks_.empty() && marks_.back().seq == issued_)) return Status::ok();
    Mark m{last_, issued_, nullptr};
    if (!spare_.empty()) {
      m.done = spare_.back();
      spare_.pop_back();
    } else {
      ZB_CUDA_CHECK(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
    }
    ZB_CUDA_CHECK(cudaEventRecord(m.done, stream_));
    marks_.push_back(m);
    return Status::ok();
  }

  // One event serves every call: a stream wait binds to the record made before it.
  Status comm_waits_for_compute(void* compute_stream) override {
    ZB_CUDA_CHECK(cudaEventRecord(compute_done_, static_cast<cudaStream_t>(compute_stream)));
    ZB_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
    return Status::ok();
  }

  // The mark for `event` is the one recorded at its sequence number; if it has left the
  // list, the host already saw it complete.
  Status compute_waits_for(const Event& event, void* compute_stream) override {
    for (const Mark& m : marks_)
      if (m.seq == event.seq) {
        ZB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(compute_stream), m.done, 0));
        break;
      }
    return Status::ok();
  }

  // Polls rather than blocks so a collective that never completes (a rank skipped it)
  // becomes an error naming it, and NCCL's asynchronous errors surface too. The first
  // kSpinS of a wait spin (yielding), as cudaStreamSynchronize's own default does where
  // the node has a core to spare; only a longer wait sleeps between polls. Sleeping from the
  // start put about 80 us on every waited-for call on an H200 (a 20 us sleep oversleeps),
  // sixteen times NCCL's own 5 us at one rank: the harness, not the library.
  static constexpr double kSpinS = 2e-3;
  Status wait(const Event& event) override {
    auto start = std::chrono::steady_clock::now();
    while (!marks_.empty() && marks_.front().seq <= event.seq) {
      Mark& m = marks_.front();
      cudaError_t q = cudaEventQuery(m.done);
      if (q == cudaSuccess) {
        spare_.push_back(m.done);
        marks_.pop_front();
        continue;
      }
      if (q != cudaErrorNotReady)
        return Status::error(describe(m.rec) + ": cudaEventQuery failed: " + cudaGetErrorString(q));
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        ZB_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
        if (async != ncclSuccess)
          return Status::error(describe(m.rec) + ": NCCL asynchronous error: " +
                               ncclGetErrorString(async));
      }
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_) {
        for (ncclComm_t c : comms_) ncclCommAbort(c);
        return timeout_error(describe(m.rec));
      }
      if (waited < kSpinS) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return Status::ok();
  }

  Status set_progress(Progress) override { return synchronize(); }

  Status bare(Coll op, const void* send, void* recv, size_t count, DType dtype, Group group) override {
    return call(op, send, recv, count, dtype, group);
  }
  Status bare_synchronize() override {
    ZB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Status::ok();
  }

 protected:
  Status issue(const CollRecord& op, const void* send, void* recv, size_t) override {
    ZB_RETURN_IF_ERROR(call(op.op, send, recv, op.count, op.dtype, op.group));
    ++issued_;
    last_ = op;
    return Status::ok();
  }

 private:
  Status call(Coll op, const void* send, void* recv, size_t count, DType dtype, Group group) {
    size_t n = size_t(group_size(group));
    ncclComm_t comm = comms_[int(group)];
    ncclDataType_t t = nccl_type(dtype);
    switch (op) {
      case Coll::all_reduce:
        ZB_NCCL_CHECK(ncclAllReduce(send, recv, count, t, ncclSum, comm, stream_));
        break;
      case Coll::reduce_scatter:
        ZB_NCCL_CHECK(ncclReduceScatter(send, recv, count / n, t, ncclSum, comm, stream_));
        break;
      case Coll::all_gather:
        ZB_NCCL_CHECK(ncclAllGather(send, recv, count / n, t, comm, stream_));
        break;
      case Coll::all_to_all: {
        // NCCL has no all-to-all call: a send and a receive per peer, grouped so that NCCL
        // runs them as one operation (nccl-tests' alltoall does the same).
        const size_t block = count / n, step = block * dtype_size(dtype);
        ZB_NCCL_CHECK(ncclGroupStart());
        for (size_t p = 0; p < n; ++p) {
          ZB_NCCL_CHECK(ncclSend(static_cast<const char*>(send) + p * step, block, t, int(p), comm, stream_));
          ZB_NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + p * step, block, t, int(p), comm, stream_));
        }
        ZB_NCCL_CHECK(ncclGroupEnd());
        break;
      }
    }
    return Status::ok();
  }

  // A recorded point of the stream: complete once the collective numbered `seq` is, which
  // was `rec` (named in a timeout).
  struct Mark {
    CollRecord rec;
    uint64_t seq;
    cudaEvent_t done;
  };
  std::function<Status(const std::string&)> barrier_;  // the control plane's
  ncclComm_t comm_;      // the world's
  ncclComm_t comms_[3];  // by Group
  cudaStream_t stream_;
  cudaEvent_t compute_done_;
  std::deque<Mark> marks_;
  std::vector<cudaEvent_t> spare_;  // completed marks' events, reused
  CollRecord last_{Coll::all_reduce, 0, DType::bf16};
  uint64_t issued_ = 0;
};

}  // namespace

Status make_nccl_communicator(const Topology& topo, double timeout_s, const Bootstrap& boot,
                              std::unique_ptr<Communicator>* out) {
  const int rank = topo.rank, size = topo.size;
  // The GPU: the launcher's local rank (LOCAL_RANK, SLURM_LOCALID), else the rank's place among
  // the ranks of its machine; by machine, not by a declared node.
  ZB_RETURN_IF_ERROR(select_gpu(topo.device_rank).context("rank " + std::to_string(rank)));

  // NCCL's own bootstrap: with NCCL_COMM_ID=host:port every rank makes the same id itself (rank
  // 0 listens there); otherwise rank 0 makes one and the control plane hands it to every rank.
  ncclUniqueId id;
  const char* comm_id = std::getenv("NCCL_COMM_ID");
  if ((comm_id && *comm_id) || rank == 0) ZB_NCCL_CHECK(ncclGetUniqueId(&id));
  if (!(comm_id && *comm_id)) {
    std::vector<std::string> all;
    const std::string mine = rank == 0 ? std::string(reinterpret_cast<const char*>(&id), sizeof id) : "";
    ZB_RETURN_IF_ERROR(boot.exchange(mine, &all, "NCCL's unique id from rank 0"));
    if (all[0].size() != sizeof id)
      return Status::error("rank " + std::to_string(rank) + ": NCCL's unique id from rank 0 has " +
                           std::to_string(all[0].size()) + " bytes, not " + std::to_string(sizeof id));
    std::memcpy(&id, all[0].data(), sizeof id);
  }
  ncclComm_t comms[3];
  ZB_NCCL_CHECK(ncclCommInitRank(&comms[0], size, id, rank));
  // Keyed as Topology::members orders each group, as the MPI backend splits.
  ZB_NCCL_CHECK(ncclCommSplit(comms[0], topo.node, topo.local_rank, &comms[int(Group::node)], nullptr));
  ZB_NCCL_CHECK(ncclCommSplit(comms[0], topo.local_rank, topo.node, &comms[int(Group::cross)], nullptr));
  cudaStream_t stream;
  ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t compute_done;
  ZB_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done, cudaEventDisableTiming));
  *out = std::make_unique<NcclCommunicator>(boot, comms, stream, compute_done, topo, timeout_s);
  return Status::ok();
}

}  // namespace zb
