// The timing loops: warm-up, timed iterations, and one reduction over ranks after the loop of
// every time and side sample they measured; and around each repetition, the reference
// collective that says whether the host kept its speed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "harness/comm/traffic.h"
#include "harness/core/clock.h"
#include "harness/core/stats.h"
#include "harness/driver/driver.h"
#include "harness/predict/sweep.h"

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
  reported_ = t;
  has_report_ = true;
}

void Run::finish() {
  if (!has_report_) return;
  size_t i = 0;
  for (auto _ : state_) {
    state_.SetIterationTime(i < reported_.times.size() ? reported_.times[i] : reported_.mean_s);
    ++i;
  }
  has_report_ = false;
}

void Run::counter(const std::string& name, double value) { state_.counters[name] = value; }

// The reference collective: one fixed library call timed around every repetition of a program
// that asks for it, so that results taken minutes apart (a sweep, then the steps priced from
// it) can say whether the host ran at one speed for both. A virtual machine's cores can move
// under it: on a 2-core guest here a 1 MiB all-reduce between two ranks took 0.15 ms or 0.6 ms
// for seconds at a time (docs/measurements.md).
Status Driver::time_reference(int calls, std::vector<double>* times) {
  const size_t count = kReferenceBytes / dtype_size(DType::f32);
  if (!reference_buffer_.data()) {
    ZB_RETURN_IF_ERROR(Buffer::allocate(comm_->mem_kind(), kReferenceBytes, &reference_buffer_));
    ZB_RETURN_IF_ERROR(zero_bytes(reference_buffer_.data(), reference_buffer_.kind(), kReferenceBytes));
  }
  // The library call has no timeout of its own: every rank is known to have come this far
  // first, through the control plane's bounded barrier.
  ZB_RETURN_IF_ERROR(comm_->synchronize());
  ZB_RETURN_IF_ERROR(control_->barrier(Wait::barrier, "the reference collective"));
  void* data = reference_buffer_.data();
  for (int i = -1; i < calls; ++i) {
    const double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(comm_->bare(Coll::all_reduce, data, data, count, DType::f32));
    ZB_RETURN_IF_ERROR(comm_->bare_synchronize());
    if (i >= 0) times->push_back(now_seconds() - t0);
  }
  return Status::ok();
}

// Every rank stops polling together: whether it is late is reduced like the time.
Status Driver::reference_set(std::vector<double>* times, double deadline, double* slowest_s, bool* late) {
  times->clear();
  ZB_RETURN_IF_ERROR(time_reference(kReferenceCalls, times));
  std::vector<double> v{median(*times), now_seconds() >= deadline ? 1.0 : 0.0};
  ZB_RETURN_IF_ERROR(max_over_ranks(&v));
  *slowest_s = v[0];
  *late = v[1] > 0;
  return Status::ok();
}

// Every rank takes the same decisions, on values reduced over the control plane. A try that
// ran at another speed is run again whole, its report and counters replaced. With one try
// allowed nothing waits: the reference is timed before and after, as for the counter alone.
Status Driver::run_at_host_speed(const std::function<Status()>& repetition, double* reference_s, int* tries) {
  const bool retry = host_tries_ > 1;
  std::vector<double> before, after;
  double b = 0, a = 0;
  bool late = false;
  if (retry && reference_sets_.empty()) {
    const double until = now_seconds() + kHostCalibrationSeconds;
    for (late = false; !late; std::this_thread::sleep_for(std::chrono::duration<double>(kHostPollSeconds))) {
      ZB_RETURN_IF_ERROR(reference_set(&before, until, &b, &late));
      reference_sets_.push_back(b);
    }
  }
  for (*tries = 1;; ++*tries) {
    const double until = now_seconds() + kHostWaitSeconds;
    ZB_RETURN_IF_ERROR(reference_set(&before, until, &b, &late));
    std::vector<double> waited;
    while (retry && !same_host_speed(b, fastest_host_speed(reference_sets_))) {
      waited.push_back(b);
      if (late) {  // the host has not come back: the speeds it ran at meanwhile are the ones kept to
        reference_sets_ = waited;
        break;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(kHostPollSeconds));
      ZB_RETURN_IF_ERROR(reference_set(&before, until, &b, &late));
    }
    ZB_RETURN_IF_ERROR(repetition());
    ZB_RETURN_IF_ERROR(reference_set(&after, INFINITY, &a, &late));
    if (fault_slow_reference_ > 0) {  // test only: as if the host slowed during this try
      --fault_slow_reference_;
      a *= 10;
      for (double& x : after) x *= 10;
    }
    std::vector<double> all = before;
    all.insert(all.end(), after.begin(), after.end());
    std::vector<double> m{median(all)};
    ZB_RETURN_IF_ERROR(max_over_ranks(&m));
    *reference_s = m[0];
    if (!retry) return Status::ok();
    reference_sets_.push_back(b);
    reference_sets_.push_back(a);
    if (*tries >= host_tries_ || repetition_at_fastest_speed(b, a, fastest_host_speed(reference_sets_)))
      return Status::ok();
  }
}

}  // namespace zb
