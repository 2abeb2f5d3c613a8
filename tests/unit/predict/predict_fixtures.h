// Synthetic inputs for the predictor's unit tests: a swept series made from a link, and a
// collective as the recorder logs it.
#pragma once

#include <cstdint>
#include <string>

#include "harness/comm/traffic.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"

namespace zb {

// `op` over `ranks` ranks in `tier`, BF16, timed at 64 KiB to 4 MiB as a ring over a link of
// `alpha` seconds a step and `spb` seconds a byte.
inline SweepSeries series(Coll op, int ranks, Tier tier, const std::string& group, double alpha, double spb) {
  SweepSeries s;
  s.op = op, s.dtype = "bf16", s.group = group, s.ranks = ranks, s.tier = tier;
  const LinkFit link{alpha, spb, 0};
  for (double b = 65536; b <= 4 << 20; b *= 2) s.points.push_back({b, ring_seconds(op, ranks, b, link)});
  return s;
}

// A BF16 collective of `bytes` over group `g` of `ranks` ranks.
inline CollRecord rec(Coll op, uint64_t bytes, Group g, int ranks) {
  CollRecord c{op, bytes / 2, DType::bf16};
  c.group = g, c.ranks = ranks;
  return c;
}

}  // namespace zb
