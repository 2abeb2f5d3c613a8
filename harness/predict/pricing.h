// What each collective of a recorded step costs: read off the sweep where it timed that op
// over that many ranks in that tier, else from the tier's fitted link (more ranks than swept,
// another node shape), and always from the link when the inter-node rate is set (--link-gbps).
#pragma once

#include <cmath>
#include <string>

#include "harness/comm/topology.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"

namespace zb {

class Pricer {
 public:
  // `inter_gbps`: when finite, links between nodes at this rate (their fitted latency kept; a
  // sweep of one node lends its own link's latency).
  Pricer(const Sweep& sweep, const Tiers& tiers, const Topology& topo, double inter_gbps = NAN)
      : sweep_(sweep), tiers_(tiers), topo_(topo), inter_gbps_(inter_gbps) {}

  // The collective as the recorder logged it (its group and that group's size). Sets
  // `missing` (once) to a line naming what the sweep lacks when it can price it neither way.
  CollCost cost(const CollRecord& c, Status* missing) const;

 private:
  const Sweep& sweep_;
  const Tiers& tiers_;
  const Topology& topo_;
  double inter_gbps_;
};

}  // namespace zb
