// Topology: the node split and the node numbering.
#include "harness/comm/topology.h"

namespace zb {

Status dup_comm(MPI_Comm comm, MPI_Comm* out) {
  ZB_MPI_CHECK(MPI_Comm_dup(comm, out));
  ZB_MPI_CHECK(MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN));
  return Status::ok();
}

Status make_topology(MPI_Comm world, Topology* out) {
  Topology t;
  ZB_MPI_CHECK(MPI_Comm_rank(world, &t.rank));
  ZB_MPI_CHECK(MPI_Comm_size(world, &t.size));
  MPI_Comm node;
  ZB_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &node));
  ZB_MPI_CHECK(MPI_Comm_rank(node, &t.local_rank));
  ZB_MPI_CHECK(MPI_Comm_size(node, &t.local_size));
  // A node's number: how many nodes' first ranks come before its own first rank.
  int leader = t.local_rank == 0 ? 1 : 0, before = 0;
  ZB_MPI_CHECK(MPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, world));
  if (t.rank == 0) before = 0;  // MPI_Exscan leaves rank 0's result undefined
  t.node = before;
  ZB_MPI_CHECK(MPI_Bcast(&t.node, 1, MPI_INT, 0, node));
  ZB_MPI_CHECK(MPI_Allreduce(&leader, &t.nodes, 1, MPI_INT, MPI_SUM, world));
  MPI_Comm_free(&node);
  *out = t;
  return Status::ok();
}

}  // namespace zb
