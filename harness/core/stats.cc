// Order statistics: sort a copy, pick by rank.
#include "harness/core/stats.h"

#include <algorithm>
#include <cmath>

namespace zb {

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

double quantile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = size_t(std::ceil(std::clamp(p, 0.0, 1.0) * double(v.size())));
  return v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
}

}  // namespace zb
