// NCCL backend: device buffers, one CUDA stream for communication, one GPU per rank chosen
// by node-local rank, bootstrapped through MPI. Kept thin: everything above is shared.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <thread>

#include "harness/comm.h"

namespace zb {
namespace {

ncclDataType_t nccl_type(DType d) { return d == DType::bf16 ? ncclBfloat16 : ncclFloat32; }

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm mpi, ncclComm_t comm, cudaStream_t stream, cudaEvent_t compute_done,
                   int rank, int size, double timeout_s)
      : Communicator(rank, size, timeout_s), mpi_(mpi), comm_(comm), stream_(stream),
        compute_done_(compute_done) {}

  ~NcclCommunicator() override {
    for (auto& op : inflight_) cudaEventDestroy(op.done);
    cudaEventDestroy(compute_done_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
    MPI_Comm_free(&mpi_);
  }

  Backend backend() const override { return Backend::nccl; }
  MemKind memKind() const override { return MemKind::device; }
  std::string libraryVersion() const override {
    int v = 0;
    ncclGetVersion(&v);
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }

  Status barrier() override {
    ZB_RETURN_IF_ERROR(synchronize());
    ZB_MPI_CHECK(MPI_Barrier(mpi_));
    return Status::ok();
  }

  Status record(Event* event) override {
    event->seq = issued_;
    return Status::ok();
  }

  // One event serves every call: a stream wait binds to the record made before it.
  Status afterCompute(void* compute_stream) override {
    ZB_CUDA_CHECK(cudaEventRecord(compute_done_, static_cast<cudaStream_t>(compute_stream)));
    ZB_CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
    return Status::ok();
  }

  // The collective that completes `event` is the one issued as number event.seq; if it has
  // left the in-flight list, the host already saw it complete.
  Status computeAfter(const Event& event, void* compute_stream) override {
    for (const Inflight& op : inflight_)
      if (op.seq == event.seq) {
        ZB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(compute_stream), op.done, 0));
        break;
      }
    return Status::ok();
  }

  // Polls rather than blocks so a collective that never completes (a rank skipped it)
  // becomes an error naming it, and NCCL's asynchronous errors surface too.
  Status wait(const Event& event) override {
    auto start = std::chrono::steady_clock::now();
    while (!inflight_.empty() && inflight_.front().seq <= event.seq) {
      Inflight& op = inflight_.front();
      cudaError_t q = cudaEventQuery(op.done);
      if (q == cudaSuccess) {
        cudaEventDestroy(op.done);
        inflight_.pop_front();
        continue;
      }
      if (q != cudaErrorNotReady)
        return Status::error(describe(op.rec) + ": cudaEventQuery failed: " +
                             cudaGetErrorString(q));
      ncclResult_t async = ncclSuccess;
      ZB_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess)
        return Status::error(describe(op.rec) + ": NCCL asynchronous error: " +
                             ncclGetErrorString(async));
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_) {
        ncclCommAbort(comm_);
        char buf[64];
        std::snprintf(buf, sizeof buf, "%g", timeout_s_);
        return Status::error("timeout: " + describe(op.rec) + " did not complete within " + buf +
                             " s (a rank skipped or never reached this collective)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return Status::ok();
  }

 protected:
  Status issue(const CollRecord& op, const void* send, void* recv, size_t) override {
    size_t n = size_t(size_);
    ncclDataType_t t = nccl_type(op.dtype);
    switch (op.op) {
      case Coll::all_reduce:
        ZB_NCCL_CHECK(ncclAllReduce(send, recv, op.count, t, ncclSum, comm_, stream_));
        break;
      case Coll::reduce_scatter:
        ZB_NCCL_CHECK(ncclReduceScatter(send, recv, op.count / n, t, ncclSum, comm_, stream_));
        break;
      case Coll::all_gather:
        ZB_NCCL_CHECK(ncclAllGather(send, recv, op.count / n, t, comm_, stream_));
        break;
    }
    Inflight f{op, ++issued_, nullptr};
    ZB_CUDA_CHECK(cudaEventCreateWithFlags(&f.done, cudaEventDisableTiming));
    ZB_CUDA_CHECK(cudaEventRecord(f.done, stream_));
    inflight_.push_back(f);
    return Status::ok();
  }

 private:
  struct Inflight {
    CollRecord rec;
    uint64_t seq;
    cudaEvent_t done;
  };
  MPI_Comm mpi_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t compute_done_;
  std::deque<Inflight> inflight_;
  uint64_t issued_ = 0;
};

}  // namespace

Status make_nccl_communicator(MPI_Comm world, double timeout_s,
                              std::unique_ptr<Communicator>* out) {
  MPI_Comm mpi, local;
  ZB_MPI_CHECK(MPI_Comm_dup(world, &mpi));
  ZB_MPI_CHECK(MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN));
  int rank = 0, size = 0, local_rank = 0;
  ZB_MPI_CHECK(MPI_Comm_rank(mpi, &rank));
  ZB_MPI_CHECK(MPI_Comm_size(mpi, &size));
  ZB_MPI_CHECK(MPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  ZB_MPI_CHECK(MPI_Comm_rank(local, &local_rank));
  MPI_Comm_free(&local);
  ZB_RETURN_IF_ERROR(select_gpu(local_rank).context("rank " + std::to_string(rank)));

  ncclUniqueId id;
  if (rank == 0) ZB_NCCL_CHECK(ncclGetUniqueId(&id));
  ZB_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi));
  ncclComm_t comm;
  ZB_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  cudaStream_t stream;
  ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t compute_done;
  ZB_CUDA_CHECK(cudaEventCreateWithFlags(&compute_done, cudaEventDisableTiming));
  *out = std::make_unique<NcclCommunicator>(mpi, comm, stream, compute_done, rank, size, timeout_s);
  return Status::ok();
}

}  // namespace zb
