// The network a stage needs: the lowest inter-node link rate at which its step's exposed
// communication stays within a share of the step, and the rate below which a quantized step
// beats the unquantized one, each found on the predictor's own replay.
#pragma once

#include <functional>

#include "harness/predict/simulate.h"

namespace zb {

// Rates searched, Gbit/s: from a slow WAN to beyond any link sold.
constexpr double kMinLinkGbps = 1e-3, kMaxLinkGbps = 1e5;
// The share of the step exposed communication may take (--exposed-limit's default): 5%, a
// step slowed by its network no more than run-to-run noise slows it.
constexpr double kDefaultExposedLimit = 0.05;

// The lowest rate r in [kMinLinkGbps, kMaxLinkGbps] with exposed_s <= limit x step_s for the
// step `predict_at(r)` predicts, to a relative 1e-6 (bisection on log r: the exposed share only
// falls as the link gets faster). kMinLinkGbps when even that rate is fast enough; NaN when
// none is (what stays exposed then is latency, the hand-off or links within a node).
double required_link_gbps(const std::function<StepPrediction(double gbps)>& predict_at, double limit);

// The rate r in [kMinLinkGbps, kMaxLinkGbps] where `gain(r)` (a quantized step's time less the
// unquantized one's) turns from negative (quantized faster, on slow links) to positive, to a
// relative 1e-6 by bisection on log r. kMaxLinkGbps when it is faster at every rate; NaN when
// it is faster at none.
double crossing_link_gbps(const std::function<double(double gbps)>& gain);

}  // namespace zb
