// The collective model: piecewise linear inside the sweep, end segments extended beyond it.
#include "harness/predict/coll_model.h"

#include <algorithm>
#include <cmath>

namespace zb {

Status CollModel::fit(std::vector<SweepPoint> points, CollModel* out) {
  if (points.empty()) return Status::error("a collective model needs at least one swept size");
  for (const SweepPoint& p : points)
    if (!(p.bytes > 0) || !(p.seconds >= 0) || !std::isfinite(p.seconds))
      return Status::error("a swept size needs bytes > 0 and a finite time >= 0");
  std::sort(points.begin(), points.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.bytes < b.bytes; });
  CollModel m;
  for (size_t i = 0; i < points.size();) {  // one point per size: the mean of its repeats
    size_t j = i;
    double sum = 0;
    for (; j < points.size() && points[j].bytes == points[i].bytes; ++j) sum += points[j].seconds;
    m.points_.push_back({points[i].bytes, sum / double(j - i)});
    i = j;
  }
  // Least squares of seconds on bytes: the alpha-beta summary a reader can compare with a
  // link's latency and bandwidth.
  const double n = double(m.points_.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const SweepPoint& p : m.points_) sx += p.bytes, sy += p.seconds, sxx += p.bytes * p.bytes, sxy += p.bytes * p.seconds;
  const double den = n * sxx - sx * sx;
  m.beta_ = den > 0 ? (n * sxy - sx * sy) / den : (sx > 0 ? sy / sx : 0);
  m.alpha_ = den > 0 ? (sy - m.beta_ * sx) / n : 0;
  *out = std::move(m);
  return Status::ok();
}

CollModel::Prediction CollModel::predict(double bytes) const {
  const std::vector<SweepPoint>& p = points_;
  Prediction out;
  out.extrapolated = bytes < p.front().bytes || bytes > 2 * p.back().bytes;
  if (p.size() == 1) {  // one size: time proportional to size, the only line it supports
    out.seconds = p[0].seconds * bytes / p[0].bytes;
    return out;
  }
  // The segment that holds `bytes`, or the end segment nearest to it, extended.
  size_t hi = size_t(std::upper_bound(p.begin(), p.end(), bytes,
                                      [](double b, const SweepPoint& q) { return b < q.bytes; }) -
                     p.begin());
  hi = std::clamp<size_t>(hi, 1, p.size() - 1);
  const SweepPoint &a = p[hi - 1], &b = p[hi];
  double slope = (b.seconds - a.seconds) / (b.bytes - a.bytes);
  // Beyond the sweep the line goes on from the end point, and a noisy end segment must not
  // make a larger collective faster.
  const SweepPoint& from = bytes > b.bytes ? b : a;
  if (bytes < p.front().bytes || bytes > p.back().bytes) slope = std::max(slope, 0.0);
  out.seconds = std::max(0.0, from.seconds + slope * (bytes - from.bytes));
  return out;
}

}  // namespace zb
