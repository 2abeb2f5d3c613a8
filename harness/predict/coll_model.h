// A collective's time against its size, from a measured sweep: interpolated between the swept
// sizes, a latency-plus-bandwidth (alpha-beta) line beyond them, flagged where it is a guess.
#pragma once

#include <vector>

#include "harness/core/status.h"

namespace zb {

struct SweepPoint {
  double bytes, seconds;
};

class CollModel {
 public:
  // At least one point; equal sizes are averaged.
  static Status fit(std::vector<SweepPoint> points, CollModel* out);

  struct Prediction {
    double seconds = 0;
    // Outside what the sweep supports: below its smallest size, or beyond twice its largest.
    bool extrapolated = false;
  };
  // `bytes` counts the full buffer, as the sweep does (the all-reduce's vector, the
  // reduce-scatter's input, the all-gather's output).
  Prediction predict(double bytes) const;

  // The least-squares alpha-beta line over every point: latency and seconds per byte.
  double alpha_s() const { return alpha_; }
  double beta_s_per_byte() const { return beta_; }
  double min_bytes() const { return points_.front().bytes; }
  double max_bytes() const { return points_.back().bytes; }

 private:
  std::vector<SweepPoint> points_;  // by size
  double alpha_ = 0, beta_ = 0;
};

}  // namespace zb
