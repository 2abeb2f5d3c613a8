// Topology: the node split, the node numbering, and the groups within and across nodes.
#include "harness/comm/topology.h"

#include <algorithm>
#include <string>

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
  // Every rank's place, so any rank can say which of its messages leave its node.
  int mine[2] = {t.node, t.local_rank};
  std::vector<int> all(2 * size_t(t.size));
  ZB_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, world));
  t.device_rank = t.local_rank;
  t.device_ranks = t.local_size;
  t.node_of.resize(size_t(t.size));
  t.local_of.resize(size_t(t.size));
  for (size_t r = 0; r < size_t(t.size); ++r) t.node_of[r] = all[2 * r], t.local_of[r] = all[2 * r + 1];
  *out = t;
  return Status::ok();
}

Status topology_from_hosts(int rank, const std::vector<std::string>& hosts,
                           const std::vector<int>& local_ranks, Topology* out) {
  Topology t;
  t.rank = rank;
  t.size = int(hosts.size());
  t.node_of.assign(hosts.size(), 0);
  t.local_of.assign(hosts.size(), 0);
  std::vector<std::string> names;  // by node
  std::vector<int> count;          // ranks so far, by node
  for (size_t r = 0; r < hosts.size(); ++r) {
    const size_t node = size_t(std::find(names.begin(), names.end(), hosts[r]) - names.begin());
    if (node == names.size()) names.push_back(hosts[r]), count.push_back(0);
    t.node_of[r] = int(node);
    t.local_of[r] = count[node]++;
  }
  for (size_t r = 0; r < hosts.size(); ++r)
    for (size_t q = 0; q < r; ++q)
      if (hosts[q] == hosts[r] && local_ranks[r] >= 0 && local_ranks[q] == local_ranks[r])
        return Status::error("ranks " + std::to_string(q) + " and " + std::to_string(r) + " on host " +
                             hosts[r] + " both say LOCAL_RANK=" + std::to_string(local_ranks[r]));
  t.nodes = int(names.size());
  t.node = t.node_of[size_t(rank)];
  t.local_rank = t.local_of[size_t(rank)];
  t.local_size = count[size_t(t.node)];
  t.device_rank = local_ranks[size_t(rank)] >= 0 ? local_ranks[size_t(rank)] : t.local_rank;
  t.device_ranks = t.local_size;
  *out = t;
  return Status::ok();
}

Status declare_nodes(int ranks_per_node, Topology* t) {
  if (ranks_per_node < 1 || t->size % ranks_per_node != 0)
    return Status::error("--ranks-per-node=" + std::to_string(ranks_per_node) +
                         " must divide the number of ranks (" + std::to_string(t->size) + ")");
  t->declared = true;
  t->local_size = ranks_per_node;
  t->nodes = t->size / ranks_per_node;
  for (int r = 0; r < t->size; ++r) t->node_of[size_t(r)] = r / ranks_per_node, t->local_of[size_t(r)] = r % ranks_per_node;
  t->node = t->node_of[size_t(t->rank)];
  t->local_rank = t->local_of[size_t(t->rank)];
  return Status::ok();
}

Status modelled_topology(int ranks, int ranks_per_node, Topology* out) {
  Topology t;
  t.size = ranks;
  t.node_of.assign(size_t(ranks), 0);
  t.local_of.resize(size_t(ranks));
  for (int r = 0; r < ranks; ++r) t.local_of[size_t(r)] = r;
  t.local_size = ranks;
  ZB_RETURN_IF_ERROR(declare_nodes(ranks_per_node > 0 ? ranks_per_node : ranks, &t));
  *out = t;
  return Status::ok();
}

bool Topology::uniform() const {
  std::vector<int> count(size_t(nodes), 0);
  for (int n : node_of) ++count[size_t(n)];
  return std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; });
}

std::vector<int> Topology::members(Group group, int r) const {
  std::vector<int> out;
  for (int q = 0; q < size; ++q) {
    bool in = group == Group::world || (group == Group::node && node_of[size_t(q)] == node_of[size_t(r)]) ||
              (group == Group::cross && local_of[size_t(q)] == local_of[size_t(r)]);
    if (in) out.push_back(q);
  }
  // The order the communicators are split in: by rank on the node, or by node.
  auto key = [&](int q) { return group == Group::node ? local_of[size_t(q)] : group == Group::cross ? node_of[size_t(q)] : q; };
  std::sort(out.begin(), out.end(), [&](int a, int b) { return key(a) < key(b); });
  return out;
}

bool Topology::spans_nodes(Group group) const { return group != Group::node && nodes > 1; }

}  // namespace zb
