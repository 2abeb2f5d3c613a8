// Order statistics: sort a copy, pick by rank. The binomial mean: each count's chance from the
// one before.
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

double binomial_mean(int n, double p, const std::function<double(int)>& f) {
  if (n <= 0 || p <= 0) return f(0);
  if (p >= 1) return f(n);
  double mean = 0, chance = std::pow(1 - p, n);
  for (int k = 0; k <= n; ++k) {
    mean += chance * f(k);
    chance *= double(n - k) / (k + 1) * p / (1 - p);
  }
  return mean;
}

}  // namespace zb
