// What each collective of a recorded step costs: read off the sweep where it timed that op
// over that many ranks in that tier, else from the tier's fitted link (more ranks than swept,
// another node shape), and always from the link when the inter-node rate is set (--link-gbps).
// Where the sweep timed an all-gather both on one buffer and spread, the gather pays the
// spread's time where the sweep timed its placement, at its buffer's reuse distance
// (cold_prediction); reductions read gradients the backward has just written, and are read off
// one buffer, except in the round with communication alone, whose backward writes none: there
// a reduction swept spread too pays the spread's time over the weights (the first footprint:
// CollCost::cold_s), unless an earlier collective of the step used its buffer (a slot the
// step cycles through: CollRecord::reused_buffer). In the whole step the replay moves such a
// reduction toward that time as other collectives' bytes pass before it starts.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "harness/comm/topology.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"

namespace zb {

// What part of a spread sweep's extra time over one buffer (zb_collectives --footprint=0,B) a
// step's all-gather of `ranks` ranks pays. Swept as the step runs it, all of it: in place the
// step gathers into the weights and the spread call into the next of its slots, all cold; out
// of place both read the rank's block from the next slot and write a buffer they reuse (z3's,
// hsdp's and hpz's transient layers). Against the other placement, the step's cold bytes over
// the swept call's, at most all of it: 1/N for an out-of-place gather against an in-place
// sweep. How the cold bytes cost is not proportional (at 2 ranks an out-of-place gather with
// its output reused took as long as with it spread), so a sweep of the step's own placement is
// the measurement; the ratio only stands in for one.
double gather_cold_fraction(bool step_in_place, bool swept_in_place, int ranks);

// What a call of `bytes` pays cold, where the sweep timed it on one buffer (`warm`) and spread over
// footprints (`spreads`, the smallest first; zb_collectives --footprint, --gather-footprint): at
// its buffer's reuse distance in the step (CollRecord::reuse_bytes). Up to the first footprint
// (the model's weights) that footprint's time, as z3's gathers took it at distances from an
// eighth of the weights to past them; between two footprints linear in the footprint's
// logarithm (as a 1 MB call's time went from 16 to 128 MiB on a 2-core guest: docs/predict.md);
// past the largest, or with no distance known (0), the largest. Footprints no larger than the call (a single slot)
// are left out; with none left, the time on one buffer.
CollModel::Prediction cold_prediction(const SweepSeries& warm, const std::vector<const SweepSeries*>& spreads,
                                      double bytes, uint64_t reuse_bytes);

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
