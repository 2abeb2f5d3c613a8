// Order statistics of timings: the one median and quantile every benchmark uses.
#pragma once

#include <vector>

namespace zb {

// The middle value (the mean of the two middle ones for an even count); NaN when empty.
double median(std::vector<double> values);
// The p-quantile by nearest rank (p in [0, 1]: the smallest value with at least p of the
// values at or below it); NaN when empty.
double quantile(std::vector<double> values, double p);

}  // namespace zb
