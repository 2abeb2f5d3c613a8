// Communicator: the backend-independent half (logging, faults, error context).
#include "harness/comm/communicator.h"

#include <cstdio>
#include <sstream>

namespace zb {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
    case Backend::record: return "record";
  }
  return "?";
}

Communicator::Communicator(int rank, int size, double timeout_s)
    : rank_(rank), size_(size), timeout_s_(timeout_s) {
  timeout_handler_ = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  };
}

std::string Communicator::describe(const CollRecord& op) const {
  std::ostringstream s;
  s << "rank " << rank_ << ": " << coll_name(op.op) << " of " << op.bytes() << " bytes ("
    << dtype_name(op.dtype) << ")";
  return s.str();
}

Status Communicator::timeout_error(const std::string& what) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", timeout_s_);
  return Status::error("timeout: " + what + " did not complete within " + buf +
                       " s (a rank skipped or never reached this collective)");
}

Status Communicator::submit(Coll op, const void* send, void* recv, size_t count, DType dtype) {
  // `count` is per-rank for reduce-scatter and all-gather; the log holds the full buffer.
  size_t full = op == Coll::all_reduce ? count : count * size_t(size_);
  CollRecord rec{op, full, dtype};
  if (record_times_) rec.issued_s = now_seconds();
  int64_t call = calls_++;
  if (faults_.skip_rank == rank_ && faults_.skip_call == call) return Status::ok();
  size_t index = traffic_.add(rec);
  return issue(rec, send, recv, index).context(describe(rec));
}

Status Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype) {
  return submit(Coll::all_reduce, send, recv, count, dtype);
}
Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype) {
  return submit(Coll::reduce_scatter, send, recv, recv_count, dtype);
}
Status Communicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  return submit(Coll::all_gather, send, recv, send_count, dtype);
}

Status Communicator::synchronize() {
  Event e;
  ZB_RETURN_IF_ERROR(record(&e));
  return wait(e);
}

Status resolve_backend(const std::string& flag, Backend* out) {
  int gpus = visible_gpu_count();
  if (flag == "mpi") {
    *out = Backend::mpi;
  } else if (flag == "nccl") {
    if (!cuda_built())
      return Status::error("--backend=nccl needs a CUDA build (this one was configured without "
                           "CUDA; reconfigure with -DZB_CUDA=ON)");
    if (gpus == 0)
      return Status::error("--backend=nccl: no CUDA device is visible on this machine; "
                           "use --backend=mpi or auto");
    *out = Backend::nccl;
  } else if (flag == "auto") {
    *out = gpus > 0 ? Backend::nccl : Backend::mpi;
  } else {
    return Status::error("--backend='" + flag + "' is not allowed; use auto, mpi or nccl");
  }
  return Status::ok();
}

}  // namespace zb

#ifndef ZB_HAVE_CUDA
namespace zb {
Status make_nccl_communicator(MPI_Comm, int, double, std::unique_ptr<Communicator>*) {
  return Status::error("the nccl backend needs a CUDA build (configured without CUDA)");
}
}  // namespace zb
#endif
