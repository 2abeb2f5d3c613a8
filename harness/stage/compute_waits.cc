// Compute waiting for communication, timed on the host or between marks on the engine.
#include "harness/stage/compute_waits.h"

#include <algorithm>

#include "harness/core/clock.h"
#include "harness/stage/layer_compute.h"

namespace zb {

WaitSplit split_wait(const WaitRecord& w, double last_issue_s, double late_finish_s) {
  const double whole = std::max(0.0, w.end_s - w.start_s);
  WaitSplit s;
  s.skew_s = std::clamp(last_issue_s - w.start_s, 0.0, whole);
  s.wire_s = whole - s.skew_s;
  s.late_finish_s = std::clamp(late_finish_s, 0.0, s.wire_s);
  return s;
}

void ComputeWaits::begin_step() {
  tail_ = false;
  host_s_ = host_tail_s_ = 0;
  marks_ = 0;
  pair_in_tail_.clear();
  waits_.clear();
  if (layer_compute_) layer_compute_->begin_step();
}

Status ComputeWaits::after(const Event& e) {
  if (host_) {
    double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(comm_.wait(e));
    double t1 = now_seconds();
    host_s_ += t1 - t0;
    if (tail_) host_tail_s_ += t1 - t0;
    // The collective waited for, by its entry in the traffic log (the comm spans' "log").
    const int64_t awaits = e.log_end > 0 ? e.log_end - 1 : -1;
    waits_.push_back({t0, t1, awaits});
    if (layer_compute_) layer_compute_->waited(t1 - t0);
    trace_.add({"wait", Track::wait, t0, t1, awaits >= 0 ? "\"awaits\": " + std::to_string(awaits) : ""});
    return Status::ok();
  }
  ZB_RETURN_IF_ERROR(comm_.wait(stream_awaited_));
  stream_awaited_ = e;
  ZB_RETURN_IF_ERROR(compute_.mark(marks_++));
  ZB_RETURN_IF_ERROR(comm_.compute_waits_for(e, compute_.stream()));
  pair_in_tail_.push_back(tail_);
  return compute_.mark(marks_++);
}

Status ComputeWaits::totals(double* exposed_s, double* tail_s) {
  *exposed_s = host_s_;
  *tail_s = host_tail_s_;
  for (size_t pair = 0; pair < pair_in_tail_.size(); ++pair) {
    double stood = 0;
    ZB_RETURN_IF_ERROR(compute_.seconds_between(2 * pair, 2 * pair + 1, &stood));
    *exposed_s += stood;
    if (pair_in_tail_[pair]) *tail_s += stood;
  }
  return Status::ok();
}

}  // namespace zb
