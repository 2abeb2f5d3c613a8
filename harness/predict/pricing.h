// What each collective of a recorded step costs: read off the sweep where it timed that op
// over that many ranks in that tier, else from the tier's fitted link (more ranks than swept,
// another node shape), and always from the link when the inter-node rate is set (--link-gbps).
// Where the sweep timed an all-gather both on one buffer and spread, the gather pays the part
// of the spread's extra time its cold bytes make; reductions read gradients the backward has
// just written, and are read off one buffer.
#pragma once

#include <cmath>
#include <string>

#include "harness/comm/topology.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"

namespace zb {

// What part of a spread sweep's extra time over one buffer (zb_collectives --footprint=0,B) a
// step's all-gather of `ranks` ranks pays: the bytes it finds cold over the bytes the spread
// call found cold. In place the step gathers into the weights, all cold; out of place it
// gathers into one of a few buffers it reuses (z3's, hsdp's, hpz's), warm, and only its input,
// the rank's 1/N block, is cold. The spread call found cold its output, and out of place its
// input too: so 1 in place, 1/(N+1) out of place, against a sweep of the same placement.
double gather_cold_fraction(bool step_in_place, bool swept_in_place, int ranks);

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
