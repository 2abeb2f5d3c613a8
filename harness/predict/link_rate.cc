// Bisection for the link rate a stage needs.
#include "harness/predict/link_rate.h"

#include <cmath>

namespace zb {

double required_link_gbps(const std::function<StepPrediction(double gbps)>& predict_at, double limit) {
  auto fast_enough = [&](double gbps) {
    const StepPrediction p = predict_at(gbps);
    return p.exposed_s <= limit * p.step_s;
  };
  if (!fast_enough(kMaxLinkGbps)) return NAN;
  if (fast_enough(kMinLinkGbps)) return kMinLinkGbps;
  double lo = std::log(kMinLinkGbps), hi = std::log(kMaxLinkGbps);  // lo too slow, hi fast enough
  while (hi - lo > 1e-7) {
    const double mid = (lo + hi) / 2;
    (fast_enough(std::exp(mid)) ? hi : lo) = mid;
  }
  return std::exp(hi);
}

double crossing_link_gbps(const std::function<double(double gbps)>& gain) {
  auto faster = [&](double gbps) { return gain(gbps) < 0; };
  if (faster(kMaxLinkGbps)) return kMaxLinkGbps;
  if (!faster(kMinLinkGbps)) return NAN;
  double lo = std::log(kMinLinkGbps), hi = std::log(kMaxLinkGbps);  // faster at lo, not at hi
  while (hi - lo > 1e-7) {
    const double mid = (lo + hi) / 2;
    (faster(std::exp(mid)) ? lo : hi) = mid;
  }
  return std::exp(lo);
}

}  // namespace zb
