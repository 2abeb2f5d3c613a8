// Topology: where this rank sits (world, node, rank on the node), found once by the driver,
// the groups made from it (node-local and cross-node), and the one way zerobench makes a
// communicator of its own.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"

namespace zb {

struct Topology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks that share this node's memory
  int node = 0, nodes = 1;             // nodes numbered in the order of their lowest rank
  std::vector<int> node_of{0}, local_of{0};  // of every rank
  // Among the ranks that really share this machine's memory, whatever nodes are declared:
  // what picks a GPU and shares out the cores.
  int device_rank = 0, device_ranks = 1;
  bool declared = false;  // nodes declared by declare_nodes, not found

  // Every node holds the same number of ranks, so every cross-node group has one per node.
  bool uniform() const;
  // The ranks of `group` that `rank` belongs to, in the group's own rank order: the world in
  // rank order; its node's ranks by rank on the node; the ranks at its place on every node
  // by node.
  std::vector<int> members(Group group, int rank) const;
  // Whether a group holds ranks of more than one node (the world and the cross-node groups
  // once there are several nodes), so its traffic crosses the node boundary.
  bool spans_nodes(Group group) const;
};

// Collective over `world`: nodes are the ranks that share memory (MPI_COMM_TYPE_SHARED).
Status make_topology(MPI_Comm world, Topology* out);
// The same from every rank's host name (in rank order), for a launch without MPI: the ranks of
// one host form a node, numbered in the order of their lowest rank, and a rank's place on it
// follows rank order. `local_ranks` are the launcher's (LOCAL_RANK; -1 where it gave none):
// what picks a rank's GPU; two ranks of one host that give the same one are an error.
Status topology_from_hosts(int rank, const std::vector<std::string>& hosts,
                           const std::vector<int>& local_ranks, Topology* out);
// Nodes declared instead of found: each `ranks_per_node` consecutive ranks form one node
// (to run node-aware schedules on one machine). It must divide the world size.
Status declare_nodes(int ranks_per_node, Topology* topo);

// Rank 0 of `ranks` modelled ranks, nodes of `ranks_per_node` consecutive ranks (0: one node),
// with no MPI behind them: the topology a recorded schedule runs on (zb_predict).
Status modelled_topology(int ranks, int ranks_per_node, Topology* out);

// A duplicate of `comm` that returns errors to the caller instead of aborting: every
// communicator zerobench makes (the driver's own, each backend's measured one) is one, so
// their traffic never mixes.
Status dup_comm(MPI_Comm comm, MPI_Comm* out);

}  // namespace zb
