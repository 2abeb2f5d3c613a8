// Ring costs and the per-tier latency-bandwidth fit.
#include "harness/predict/tiers.h"

#include <algorithm>

#include "harness/core/stats.h"

namespace zb {

RingCost ring_cost(Coll op, int ranks) {
  if (ranks < 2) return {};
  const double n = ranks, k = op == Coll::all_reduce ? 2 : 1;
  return {k * (n - 1), k * (n - 1) / n};
}

double ring_seconds(Coll op, int ranks, double bytes, const LinkFit& link) {
  const RingCost r = ring_cost(op, ranks);
  return r.steps * link.alpha_s + r.bytes_factor * bytes * link.seconds_per_byte;
}

double mixed_ring_seconds(Coll op, int ranks, double bytes, const LinkFit& intra, const LinkFit& inter) {
  const RingCost r = ring_cost(op, ranks);
  if (r.steps == 0) return 0;
  const double per_step = r.bytes_factor * bytes / r.steps;  // what one hop carries per step
  const double inter_hop = inter.alpha_s + per_step * inter.seconds_per_byte;
  const double intra_hop = intra.ok() ? intra.alpha_s + per_step * intra.seconds_per_byte : 0;
  return r.steps * std::max(inter_hop, intra_hop);
}

Status fit_link(const std::vector<TierPoint>& points, LinkFit* out) {
  // Each point as t = s a + f b: s steps, f the bytes a link carries; relative residuals, so
  // x = s / t and y = f / t against 1.
  double xx = 0, xy = 0, yy = 0, x1 = 0, y1 = 0;
  std::vector<double> per_byte;  // each point's own seconds per byte a link carries: 1 / y
  int n = 0;
  for (const TierPoint& p : points) {
    const RingCost r = ring_cost(p.op, p.ranks);
    if (r.steps == 0 || !(p.seconds > 0) || !(p.bytes > 0)) continue;
    const double x = r.steps / p.seconds, y = r.bytes_factor * p.bytes / p.seconds;
    xx += x * x, xy += x * y, yy += y * y, x1 += x, y1 += y;
    per_byte.push_back(1 / y);
    ++n;
  }
  if (n == 0) return Status::error("no swept collective over more than one rank to fit a link to");
  LinkFit f;
  f.points = n;
  const double det = xx * yy - xy * xy;
  if (det > 0) {
    f.alpha_s = (x1 * yy - y1 * xy) / det;
    f.seconds_per_byte = (xx * y1 - xy * x1) / det;
  }
  if (!(det > 0) || f.alpha_s < 0 || !(f.seconds_per_byte > 0)) {
    // One size, or a latency below zero: the small sizes ran faster than any latency allows
    // (a shaper's burst lets the first bytes through at once); or a rate below zero: the small
    // sizes stalled (a loaded host: the quick run's sweep beside the rest of the test suite
    // failed zb_predict --link-gbps so). Bandwidth alone, as the median of the points' own
    // rates, which neither those points nor a stalled large one can pull.
    f.alpha_s = 0;
    f.seconds_per_byte = median(per_byte);
  }
  if (!(f.seconds_per_byte > 0))
    return Status::error("the swept times do not grow with size: no bandwidth to fit");
  *out = f;
  return Status::ok();
}

Tiers fit_tiers(const Sweep& sweep, int node_links) {
  Tiers t;
  t.node_links = node_links;
  // The cross groups of a sweep over nodes ran at once, sharing their nodes' links as many
  // ways as the nodes had ranks per link: one link's own time is that share of theirs.
  t.swept_sharing = sweep.nodes() > 1 ? t.sharing(sweep.ranks_per_node()) : 1.0;
  std::vector<TierPoint> by_tier[2];
  auto on_one_buffer_too = [&](const SweepSeries& s) {
    for (const SweepSeries& t : sweep.series())
      if (t.footprint == 0 && same_collective(s, t)) return true;
    return false;
  };
  for (const SweepSeries& s : sweep.series()) {
    if (s.in_place) continue;  // the links are fitted from the collectives out of place, as before
    if (s.footprint > 0 && on_one_buffer_too(s)) continue;  // and from one buffer where both were timed
    const double unshared = s.group == "cross" ? 1.0 / t.swept_sharing : 1.0;
    for (const SweepPoint& p : s.points)
      by_tier[int(s.tier)].push_back({s.op, s.ranks, p.bytes, p.seconds * unshared});
  }
  if (!fit_link(by_tier[int(Tier::intra)], &t.intra)) t.intra = LinkFit();
  if (!fit_link(by_tier[int(Tier::inter)], &t.inter)) t.inter = LinkFit();
  return t;
}

}  // namespace zb
