// Node traffic: ring accounting by node, and the node counters a launcher names.
#include "harness/comm/node_traffic.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace zb {

NodeBytes ring_node_bytes(const CollRecord& rec, const Topology& topo) {
  std::vector<int> ring = topo.members(rec.group, topo.rank);
  NodeBytes out;
  const int n = int(ring.size());
  if (n < 2) return out;
  if (rec.op == Coll::all_to_all) {
    // No ring: each other member gets its own block straight from this rank.
    const double block = double(rec.bytes()) / n;
    for (int peer : ring)
      if (peer != topo.rank) (topo.node_of[size_t(peer)] != topo.node ? out.inter : out.intra) += block;
    return out;
  }
  size_t at = size_t(std::find(ring.begin(), ring.end(), topo.rank) - ring.begin());
  int next = ring[(at + 1) % size_t(n)];
  double sent = ideal_wire_bytes(rec.op, rec.bytes(), n);
  (topo.node_of[size_t(next)] != topo.node ? out.inter : out.intra) = sent;
  return out;
}

NodeBytes ring_node_bytes(const std::vector<CollRecord>& recs, const Topology& topo) {
  NodeBytes sum;
  for (const CollRecord& r : recs) {
    NodeBytes b = ring_node_bytes(r, topo);
    sum.inter += b.inter;
    sum.intra += b.intra;
  }
  return sum;
}

NodeVolume node_volume(const std::vector<CollRecord>& recs, const Topology& topo) {
  NodeVolume v;
  for (const CollRecord& r : recs) (topo.spans_nodes(r.group) ? v.inter : v.intra) += volume_elements(r);
  return v;
}

int64_t read_node_counter(const char* env) {
  const char* path = std::getenv(env);
  if (!path || !*path) return -1;
  std::ifstream f(path);
  int64_t v = -1;
  if (!(f >> v) || v < 0) return -1;
  return v;
}

}  // namespace zb
