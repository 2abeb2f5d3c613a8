// The links of each tier (within a node, between nodes) as latency and bandwidth, fitted from a
// sweep's ring collectives, and a collective's time on any number of ranks from them: what
// prices the collectives a sweep did not time (more ranks, another node shape, another link).
#pragma once

#include <cmath>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"
#include "harness/predict/sweep.h"

namespace zb {

// One tier's link: each ring step costs alpha_s, and each byte a link carries seconds_per_byte.
struct LinkFit {
  double alpha_s = NAN, seconds_per_byte = NAN;
  int points = 0;
  bool ok() const { return std::isfinite(alpha_s) && seconds_per_byte > 0; }
  double gbps() const { return 8e-9 / seconds_per_byte; }
};

// A ring over `ranks` ranks: its steps, and the share of the full buffer each link carries
// (nccl-tests' bus-bandwidth factors): all-reduce 2(N-1) steps and 2(N-1)/N, the others
// N-1 and (N-1)/N.
struct RingCost {
  double steps = 0, bytes_factor = 0;
};
RingCost ring_cost(Coll op, int ranks);
// steps x alpha + bytes_factor x bytes x seconds_per_byte.
double ring_seconds(Coll op, int ranks, double bytes, const LinkFit& link);
// A flat ring whose hops are of two tiers (a world over several nodes of several ranks): each
// step as long as its slower hop.
double mixed_ring_seconds(Coll op, int ranks, double bytes, const LinkFit& intra, const LinkFit& inter);

// A swept time: `op` over `ranks` ranks moved `bytes` (the full buffer) in `seconds`.
struct TierPoint {
  Coll op;
  int ranks;
  double bytes, seconds;
};
// Latency and bandwidth by least squares of the relative error over every point (so small and
// large sizes weigh alike), each point's time taken as ring_seconds; where the latency comes
// out negative, none, and the bandwidth the median of the points' own. Points over one rank
// are left out. Fails when fewer than one point is left or the bandwidth comes out not
// positive.
Status fit_link(const std::vector<TierPoint>& points, LinkFit* out);

struct Tiers {
  LinkFit intra, inter;  // not ok() where the sweep has no series of that tier
  // The links each node has to the others (zb_predict --node-links): 0, one per rank (a NIC
  // per GPU), so that no two of a node's ranks share one. Fewer, and the collectives that every
  // rank of a node runs at once across nodes (the cross groups' of hsdp) share them.
  int node_links = 0;
  // How many ranks shared each link in the sweep's own cross groups (fit_tiers sets it).
  double swept_sharing = 1;
  // How many of a node's `ranks_per_node` ranks share each of its links, at least 1.
  double sharing(int ranks_per_node) const {
    return node_links > 0 && ranks_per_node > node_links ? double(ranks_per_node) / node_links : 1.0;
  }
  // Whether links between nodes can be priced at a given rate: from their own fit, or where the
  // sweep ran on one node from its link's latency.
  bool can_price_inter() const { return inter.ok() || intra.ok(); }
};
// Each tier from every series of the sweep in it, with `node_links` links per node (Tiers);
// each link fitted as one rank's alone.
Tiers fit_tiers(const Sweep& sweep, int node_links = 0);

}  // namespace zb
