// The timing loops: warm-up, timed iterations, and one reduction over ranks after the loop of
// every time and side sample they measured.
#include <algorithm>
#include <cmath>

#include "harness/comm/traffic.h"
#include "harness/core/clock.h"
#include "harness/core/stats.h"
#include "harness/driver/driver.h"

namespace zb {

double Timing::side(const std::string& name) const {
  auto it = sides.find(name);
  return it == sides.end() ? NAN : it->second;
}

// Per-iteration local times, side samples and socket writes, reduced over ranks once at the
// end.
struct Run::Samples {
  std::vector<double> local;
  // By name, so every rank packs them in the same order.
  std::map<std::string, std::pair<Worst, std::vector<double>>> sides;
  int64_t writes = 0;
  bool counted = true;

  Status timed(const std::function<Status()>& body) {
    int64_t w0 = process_write_bytes();
    double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(body());
    local.push_back(now_seconds() - t0);
    int64_t w1 = process_write_bytes();
    counted = counted && w0 >= 0 && w1 >= 0;
    writes += w1 - w0;
    return Status::ok();
  }

  // The worst rank of each iteration (the maximum of each time), and the statistics of those.
  // One reduction for the times and every side sample: a minimum is the maximum negated.
  Status fill(Driver& d, Timing* out) const {
    std::vector<double> all = local;
    for (const auto& [name, side] : sides)
      for (double v : side.second) all.push_back(side.first == Worst::min ? -v : v);
    const double own = local.empty() ? 0 : median(local);
    all.push_back(own);
    all.push_back(-own);
    ZB_RETURN_IF_ERROR(d.max_over_ranks(&all));
    Timing t;
    t.iterations = int64_t(local.size());
    t.times.assign(all.begin(), all.begin() + ptrdiff_t(local.size()));
    size_t at = local.size();
    for (const auto& [name, side] : sides) {
      std::vector<double> worst(all.begin() + ptrdiff_t(at),
                                all.begin() + ptrdiff_t(at + side.second.size()));
      at += side.second.size();
      if (side.first == Worst::min)
        for (double& v : worst) v = -v;
      t.sides[name] = median(worst);
    }
    size_t n = t.times.size();
    if (n) {
      double sum = 0;
      for (double x : t.times) sum += x;
      t.mean_s = sum / double(n);
      t.min_s = *std::min_element(t.times.begin(), t.times.end());
      t.median_s = median(t.times);
      t.p99_s = quantile(t.times, 0.99);
    }
    t.slowest_rank_median_s = all[all.size() - 2];
    t.fastest_rank_median_s = -all.back();
    t.write_bytes = counted && n ? double(writes) / double(n) : -1;
    *out = std::move(t);
    return Status::ok();
  }
};

// While alive, sample() records into `samples`; cleared on every way out of a loop.
class Run::Recording {
 public:
  Recording(Run& run, Samples* samples) : run_(run) { run_.recording_ = samples; }
  ~Recording() { run_.recording_ = nullptr; }

 private:
  Run& run_;
};

void Run::sample(const std::string& name, double value, Worst worst) {
  if (!recording_) return;
  auto& side = recording_->sides[name];
  side.first = worst;
  side.second.push_back(value);
}

Status Run::per_iteration(const std::function<Status()>& iteration, Timing* out) {
  Driver& d = driver_;
  for (int64_t i = 0; i < d.warmup(); ++i) ZB_RETURN_IF_ERROR(iteration());
  ZB_RETURN_IF_ERROR(d.comm().barrier());
  Samples s;
  {
    Recording on(*this, &s);
    for (int64_t i = 0; i < d.iterations(); ++i) ZB_RETURN_IF_ERROR(s.timed(iteration));
  }
  return s.fill(d, out);
}

Status Run::batch(const std::function<Status()>& issue, const std::function<Status()>& complete,
                  Timing* out) {
  Driver& d = driver_;
  for (int64_t i = 0; i < d.warmup(); ++i) {
    ZB_RETURN_IF_ERROR(issue());
    ZB_RETURN_IF_ERROR(complete());
  }
  ZB_RETURN_IF_ERROR(d.comm().barrier());
  const int64_t iters = d.iterations();
  Samples s;
  ZB_RETURN_IF_ERROR(s.timed([&]() -> Status {
    for (int64_t i = 0; i < iters; ++i) ZB_RETURN_IF_ERROR(issue());
    return complete();
  }));
  Timing whole;
  ZB_RETURN_IF_ERROR(s.fill(d, &whole));
  Timing t;
  t.iterations = iters;
  t.mean_s = t.min_s = t.median_s = t.p99_s = whole.mean_s / double(iters);
  t.write_bytes = whole.write_bytes < 0 ? -1 : whole.write_bytes / double(iters);
  *out = t;
  return Status::ok();
}

Status Run::interleaved(const std::vector<Variant>& variants, std::vector<Timing>* out) {
  Driver& d = driver_;
  std::vector<Samples> samples(variants.size());
  for (int64_t i = 0; i < d.warmup() + d.iterations(); ++i)
    for (size_t k = 0; k < variants.size(); ++k) {
      const Variant& v = variants[k];
      // Every rank starts each variant together: a rank done early with the last one would
      // otherwise run this one (a compute-only step's kernels, a bandwidth probe) beside
      // another rank's tail of it, and on shared cores stretch it. At 2 nodes x 2 ranks on 2
      // cores that added 50 ms to dp's communication-only step (docs/measurements.md).
      ZB_RETURN_IF_ERROR(d.comm().barrier());
      if (v.before) ZB_RETURN_IF_ERROR(v.before());
      if (i >= d.warmup()) {
        Recording on(*this, &samples[k]);
        ZB_RETURN_IF_ERROR(samples[k].timed(v.body));
      } else {
        ZB_RETURN_IF_ERROR(v.body());
      }
      if (v.after) ZB_RETURN_IF_ERROR(v.after());
    }
  out->resize(variants.size());
  for (size_t k = 0; k < variants.size(); ++k) ZB_RETURN_IF_ERROR(samples[k].fill(d, &(*out)[k]));
  return Status::ok();
}

void Run::report(const Timing& t) {
  size_t i = 0;
  for (auto _ : state_) {
    state_.SetIterationTime(i < t.times.size() ? t.times[i] : t.mean_s);
    ++i;
  }
}

void Run::counter(const std::string& name, double value) { state_.counters[name] = value; }

}  // namespace zb
