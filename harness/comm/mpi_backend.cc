// MPI backend: host buffers, one MPI communicator per group (a duplicate of the world, and the
// node and cross-node groups split from it); the queue, the communication thread and caller
// progress are the CPU stream's (cpu_stream.h).
#include <cstring>
#include <vector>

#include "harness/comm/cpu_stream.h"
#include "harness/comm/mpi_ops.h"
#include "harness/comm/topology.h"

namespace zb {
namespace {

// One collective's MPI call. Shared by the queued path, the caller path and the bare
// baseline, so all three issue exactly the same library call.
class MpiCalls {
 public:
  MpiCalls(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  Status run(Coll op, const void* send, void* recv, uint64_t count, DType dtype) {
    MPI_Datatype type = mpi_datatype(dtype);
    MPI_Op sum = mpi_sum_op(dtype);
    uint64_t block = op == Coll::all_reduce ? count : count / uint64_t(size_);
    if (block > uint64_t(INT32_MAX))
      return Status::error("count " + std::to_string(block) +
                           " exceeds MPI's int count; use smaller buffers");
    int n = int(block);
    const size_t esz = dtype_size(dtype);
    switch (op) {
      case Coll::all_reduce:
        ZB_MPI_CHECK(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, type, sum, comm_));
        break;
      case Coll::reduce_scatter: {
        // MPI_Reduce_scatter with equal counts rather than _block: Open MPI has a ring
        // algorithm for the former only, and the ring is what moves the ideal bytes.
        if (counts_.empty() || counts_[0] != n) counts_.assign(size_t(size_), n);
        char* own = static_cast<char*>(const_cast<void*>(send)) + size_t(rank_) * block * esz;
        if (recv == own) {
          // NCCL's in-place form (recv is this rank's block of send). MPI's in-place form
          // leaves the result at the front of the buffer, so move it to the rank's block.
          ZB_MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, const_cast<void*>(send), counts_.data(),
                                          type, sum, comm_));
          if (rank_ != 0) std::memmove(own, send, block * esz);
        } else {
          ZB_MPI_CHECK(MPI_Reduce_scatter(send, recv, counts_.data(), type, sum, comm_));
        }
        break;
      }
      case Coll::all_gather: {
        bool in_place = send == static_cast<char*>(recv) + size_t(rank_) * block * esz;
        ZB_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, comm_));
        break;
      }
      case Coll::all_to_all:
        ZB_MPI_CHECK(MPI_Alltoall(send, n, type, recv, n, type, comm_));
        break;
    }
    return Status::ok();
  }

 private:
  MPI_Comm comm_;
  int rank_, size_;
  std::vector<int> counts_;  // reduce-scatter's per-rank counts, kept between calls
};

// One communicator per Group (the world, this rank's node, its cross-node group), with the
// ranks in the group's own order.
struct GroupComms {
  MPI_Comm comm[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
};

class MpiCommunicator final : public CpuStreamCommunicator {
 public:
  MpiCommunicator(const GroupComms& groups, const Topology& topo, double timeout_s)
      : CpuStreamCommunicator(topo, timeout_s), comm_(groups.comm[0]), groups_comm_(groups) {
    for (Group g : {Group::world, Group::node, Group::cross})
      calls_.emplace_back(groups.comm[int(g)], group_rank(g), group_size(g));
    start_stream();
  }

  ~MpiCommunicator() override {
    stop_stream();
    for (MPI_Comm& c : groups_comm_.comm) MPI_Comm_free(&c);
  }

  Backend backend() const override { return Backend::mpi; }
  std::string library_version() const override { return mpi_library_version(); }

 protected:
  Status call(Coll op, Group group, const void* send, void* recv, uint64_t count,
              DType dtype) override {
    return calls_[size_t(group)].run(op, send, recv, count, dtype);
  }

  Status barrier_call() override {
    ZB_MPI_CHECK(MPI_Barrier(comm_));
    return Status::ok();
  }

 private:
  MPI_Comm comm_;            // the world's: barriers
  GroupComms groups_comm_;
  std::vector<MpiCalls> calls_;  // by Group
};

}  // namespace

Status make_mpi_communicator(MPI_Comm world, const Topology& topo, double timeout_s,
                             std::unique_ptr<Communicator>* out) {
  int provided = 0;
  ZB_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    return Status::error("the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                         "communication thread needs");
  GroupComms g;
  ZB_RETURN_IF_ERROR(dup_comm(world, &g.comm[int(Group::world)]));
  // Split from the duplicate, keyed as Topology::members orders each group.
  ZB_MPI_CHECK(MPI_Comm_split(g.comm[0], topo.node, topo.local_rank, &g.comm[int(Group::node)]));
  ZB_MPI_CHECK(MPI_Comm_split(g.comm[0], topo.local_rank, topo.node, &g.comm[int(Group::cross)]));
  for (int i = 1; i < 3; ++i) ZB_MPI_CHECK(MPI_Comm_set_errhandler(g.comm[i], MPI_ERRORS_RETURN));
  ZB_RETURN_IF_ERROR(init_mpi_ops());
  *out = std::make_unique<MpiCommunicator>(g, topo, timeout_s);
  return Status::ok();
}

}  // namespace zb
