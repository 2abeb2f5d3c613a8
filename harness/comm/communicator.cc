// Communicator: the backend-independent half (logging, faults, error context).
#include "harness/comm/communicator.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace zb {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
    case Backend::gloo: return "gloo";
    case Backend::record: return "record";
  }
  return "?";
}

Communicator::Communicator(int rank, int size, double timeout_s)
    : rank_(rank), size_(size), timeout_s_(timeout_s) {
  for (Place& p : groups_) p = {rank, size};
  timeout_handler_ = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  };
}

void Communicator::set_groups(const Topology& topo) {
  for (Group g : {Group::world, Group::node, Group::cross}) {
    std::vector<int> m = topo.members(g, topo.rank);
    groups_[int(g)] = {int(std::find(m.begin(), m.end(), topo.rank) - m.begin()), int(m.size())};
  }
}

std::string Communicator::describe(const CollRecord& op) const {
  std::ostringstream s;
  s << "rank " << rank_ << ": " << coll_name(op.op) << " of " << op.bytes() << " bytes ("
    << dtype_name(op.dtype) << ")";
  if (op.group != Group::world) s << " over the " << group_name(op.group) << " group";
  return s.str();
}

Status Communicator::timeout_error(const std::string& what, const std::string& cause) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", timeout_s_);
  return Status::error("timeout: " + what + " did not complete within " + buf + " s (" +
                       (cause.empty() ? "a rank skipped or never reached this collective" : cause) + ")");
}

Status Communicator::submit(Coll op, const void* send, void* recv, size_t count, DType dtype,
                            Group group) {
  // `count` is per-rank for reduce-scatter, all-gather and all-to-all; the log holds the full
  // buffer.
  const int n = group_size(group);
  size_t full = op == Coll::all_reduce ? count : count * size_t(n);
  CollRecord rec{op, full, dtype};
  rec.group = group;
  rec.ranks = n;
  auto own_block = [&](const void* whole) {
    return static_cast<const char*>(whole) + size_t(group_rank(group)) * count * dtype_size(dtype);
  };
  rec.in_place = op == Coll::all_reduce       ? send == recv
                 : op == Coll::reduce_scatter ? recv == own_block(send)
                                              : op == Coll::all_gather && send == own_block(recv);
  if (record_times_) rec.issued_s = now_seconds();
  int64_t call = calls_++;
  if (faults_.skip_rank == rank_ && faults_.skip_call == call) return Status::ok();
  size_t index = traffic_.add(rec);
  Status s = issue(rec, send, recv, index);
  // The context only on failure: formatting it costs about a microsecond, a third of a small
  // collective.
  return s ? s : s.context(describe(rec));
}

Status Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, Group group) {
  return submit(Coll::all_reduce, send, recv, count, dtype, group);
}
Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                                    Group group) {
  return submit(Coll::reduce_scatter, send, recv, recv_count, dtype, group);
}
Status Communicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype, Group group) {
  return submit(Coll::all_gather, send, recv, send_count, dtype, group);
}

Status Communicator::all_to_all(const void* send, void* recv, size_t block_count, DType dtype,
                                Group group) {
  return submit(Coll::all_to_all, send, recv, block_count, dtype, group);
}

Status Communicator::synchronize() {
  Event e;
  ZB_RETURN_IF_ERROR(record(&e));
  return wait(e);
}

bool gloo_built() {
#ifdef ZB_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

Status resolve_backend(const std::string& flag, bool mpi_launch, const std::string& launcher,
                       Backend* out) {
  int gpus = visible_gpu_count();
  const std::string no_gloo = "this build has no Gloo (install libgloo-dev and reconfigure)";
  if (flag == "mpi") {
    if (!mpi_launch)
      return Status::error("--backend=mpi needs an MPI launcher (mpirun, or srun with a PMI plugin), "
                           "and this process was started from " + launcher +
                           ": use --backend=gloo or nccl");
    *out = Backend::mpi;
  } else if (flag == "nccl") {
    if (!cuda_built())
      return Status::error("--backend=nccl needs a CUDA build (this one was configured without "
                           "CUDA; reconfigure with -DZB_CUDA=ON)");
    if (gpus == 0)
      return Status::error("--backend=nccl: no CUDA device is visible on this machine; "
                           "use --backend=mpi, gloo or auto");
    *out = Backend::nccl;
  } else if (flag == "gloo") {
    if (!gloo_built()) return Status::error("--backend=gloo: " + no_gloo);
    *out = Backend::gloo;
  } else if (flag == "auto") {
    if (gpus > 0) {
      *out = Backend::nccl;
    } else if (mpi_launch) {
      *out = Backend::mpi;
    } else if (gloo_built()) {
      *out = Backend::gloo;
    } else {
      return Status::error("--backend=auto: started from " + launcher +
                           " without a GPU, which needs the gloo backend, and " + no_gloo);
    }
  } else {
    return Status::error("--backend='" + flag + "' is not allowed; use auto, mpi, nccl or gloo");
  }
  return Status::ok();
}

}  // namespace zb

#ifndef ZB_HAVE_CUDA
namespace zb {
Status make_nccl_communicator(const Topology&, double, const Bootstrap&, std::unique_ptr<Communicator>*) {
  return Status::error("the nccl backend needs a CUDA build (configured without CUDA)");
}
}  // namespace zb
#endif

#ifndef ZB_HAVE_GLOO
namespace zb {
Status make_gloo_communicator(const Topology&, double, const Bootstrap&, std::unique_ptr<Communicator>*) {
  return Status::error("the gloo backend needs a build with Gloo (install libgloo-dev and reconfigure)");
}
}  // namespace zb
#endif
