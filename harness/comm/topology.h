// Topology: where this rank sits (world, node, rank on the node), found once by the driver,
// and the one way zerobench makes a communicator of its own.
#pragma once

#include <mpi.h>

#include "harness/core/status.h"

namespace zb {

struct Topology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks that share this node's memory
  int node = 0, nodes = 1;             // nodes numbered in the order of their lowest rank
};

// Collective over `world`.
Status make_topology(MPI_Comm world, Topology* out);

// A duplicate of `comm` that returns errors to the caller instead of aborting: every
// communicator zerobench makes (the driver's own, each backend's measured one) is one, so
// their traffic never mixes.
Status dup_comm(MPI_Comm comm, MPI_Comm* out);

}  // namespace zb
