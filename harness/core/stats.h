// Order statistics of timings: the one median and quantile every benchmark uses; and the
// mean of a function of a binomial count, which the predictor's shared-host models take.
#pragma once

#include <functional>
#include <vector>

namespace zb {

// The middle value (the mean of the two middle ones for an even count); NaN when empty.
double median(std::vector<double> values);
// The p-quantile by nearest rank (p in [0, 1]: the smallest value with at least p of the
// values at or below it); NaN when empty.
double quantile(std::vector<double> values, double p);
// The mean of f(k) where k counts the successes of n trials, each with chance p (binomial).
double binomial_mean(int n, double p, const std::function<double(int)>& f);

}  // namespace zb
