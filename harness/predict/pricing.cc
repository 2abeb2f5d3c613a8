// Pricing a collective: measured where the sweep has it, modelled from the tiers elsewhere.
#include "harness/predict/pricing.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace zb {

double gather_cold_fraction(bool step_in_place, bool swept_in_place, int ranks) {
  const double block = 1.0 / std::max(1, ranks);  // of the gathered output
  const double step_cold = step_in_place ? 1.0 : block;
  const double swept_cold = swept_in_place ? 1.0 : block;
  return std::min(1.0, step_cold / swept_cold);
}

CollModel::Prediction cold_prediction(const SweepSeries& warm, const std::vector<const SweepSeries*>& spreads,
                                      double bytes, uint64_t reuse_bytes) {
  std::vector<std::pair<double, const SweepSeries*>> at;  // footprint, series
  for (const SweepSeries* s : spreads)
    if (double(s->footprint) > bytes) at.emplace_back(double(s->footprint), s);
  if (at.empty()) return warm.model.predict(bytes);
  const double reuse = reuse_bytes > 0 ? double(reuse_bytes) : at.back().first;
  if (at.size() == 1 || reuse <= at.front().first) return at.front().second->model.predict(bytes);
  size_t hi = 1;
  while (hi + 1 < at.size() && at[hi].first < reuse) ++hi;
  const CollModel::Prediction lo = at[hi - 1].second->model.predict(bytes), up = at[hi].second->model.predict(bytes);
  const double f = std::clamp(std::log(reuse / at[hi - 1].first) / std::log(at[hi].first / at[hi - 1].first), 0.0, 1.0);
  return {lo.seconds + f * (up.seconds - lo.seconds), lo.extrapolated || up.extrapolated};
}

CollCost Pricer::cost(const CollRecord& c, Status* missing) const {
  const int ranks = c.ranks > 0 ? c.ranks : topo_.size;
  const bool spans = c.group == Group::cross || (c.group == Group::world && topo_.nodes > 1);
  const Tier tier = spans ? Tier::inter : Tier::intra;
  // A world over several nodes of several ranks: a flat ring with hops of both tiers.
  const bool mixed = c.group == Group::world && topo_.nodes > 1 && topo_.size > topo_.nodes;
  const bool rate_set = spans && std::isfinite(inter_gbps_);
  const double handoff = sweep_.handoff_s(c.op);
  const SweepSeries* woken = sweep_.woken(c.op);
  // A node's ranks each run their cross group's collective at once: where they share the
  // node's links, each gets its part of them, as many as shared them in the sweep's own run.
  const bool shared = c.group == Group::cross && topo_.nodes > 1;
  const double sharing = shared ? tiers_.sharing(topo_.local_size) : 1.0;
  if (!rate_set) {
    const SweepSeries* s = sweep_.find(c.op, c.dtype, ranks, tier, group_name(c.group), c.in_place);
    if (s) {
      CollModel::Prediction p = s->model.predict(double(c.bytes()));
      const std::vector<const SweepSeries*> spreads = sweep_.spreads_of(*s);
      // A gather pays the spread time at its buffer's reuse distance: z1's and z2's in place
      // meet the gradients and the weights between two gathers of a layer; hpz's read each block
      // once a step, z3's twice, its backward soon after its forward.
      if (c.op == Coll::all_gather && !spreads.empty()) {
        const CollModel::Prediction cold = cold_prediction(*s, spreads, double(c.bytes()), c.reuse_bytes);
        p.seconds += gather_cold_fraction(c.in_place, s->in_place, ranks) * (cold.seconds - p.seconds);
        p.extrapolated = p.extrapolated || cold.extrapolated;
      }
      const double share = shared ? sharing / tiers_.swept_sharing : 1.0;
      CollCost out{p.seconds * share, handoff, p.extrapolated};
      if (woken) out.wake_s = woken->wake_s, out.wake_after_s = woken->wake_after_s;
      // A reduction of the round with communication alone over gradients no backward wrote and
      // no earlier collective of the step used (not a slot it cycles through): last touched a
      // step before, at the weights' spread time. Not at its reuse distance: z1's in-place
      // reduce-scatters, at twice the weights, took the weights' time or less in the step, where
      // the sweep's took 12 to 15% more at twice the footprint (docs/predict.md).
      const bool reduction = c.op == Coll::all_reduce || c.op == Coll::reduce_scatter;
      if (reduction && !c.reused_buffer && !spreads.empty()) {
        const CollModel::Prediction cold = cold_prediction(*s, {spreads.front()}, double(c.bytes()), 0);
        out.cold_s = cold.seconds * share;
        out.extrapolated = out.extrapolated || cold.extrapolated;
      }
      return out;
    }
  }
  if (ranks < 2) return CollCost{0, 0, false};  // one rank, unswept: nothing crosses a link
  LinkFit inter = tiers_.inter;
  inter.seconds_per_byte *= sharing;  // the fit is one link's, unshared (fit_tiers)
  if (rate_set) inter.seconds_per_byte = 8e-9 / inter_gbps_ * sharing;
  // A sweep of one node has no link between nodes to take the latency of: its own link's.
  if (rate_set && !std::isfinite(inter.alpha_s)) inter.alpha_s = tiers_.intra.alpha_s;
  const LinkFit& link = spans ? inter : tiers_.intra;
  if (!link.ok()) {
    if (*missing)
      *missing = Status::error(std::string("--sweep times no ") + coll_name(c.op) + " over " + std::to_string(ranks) +
                               " ranks " + tier_name(tier) + ", and has no " + tier_name(tier) +
                               " collective to fit the link to: sweep " +
                               (spans ? "across nodes (zb_collectives --groups=world,node,cross on several nodes)"
                                      : "within one node"));
    return CollCost{0, 0, true};
  }
  const double bytes = double(c.bytes());
  CollCost out;
  out.seconds = mixed ? mixed_ring_seconds(c.op, ranks, bytes, tiers_.intra, inter)
                      : ring_seconds(c.op, ranks, bytes, link);
  out.handoff_s = handoff;
  if (woken) out.wake_s = woken->wake_s, out.wake_after_s = woken->wake_after_s;
  out.modelled = true;
  return out;
}

}  // namespace zb
