// Recording backend: collectives are logged with their order and the waits on them, and moved
// nowhere. A step run on it costs no memory traffic and no network, whatever its size.
#include "harness/comm/recorder.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace zb {
namespace {

class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(const Topology& topo, ScheduleLog* log)
      : Communicator(topo.rank, topo.size, 1e9), log_(log) {
    set_groups(topo);
  }

  Backend backend() const override { return Backend::record; }
  MemKind mem_kind() const override { return MemKind::reserved; }
  std::string library_version() const override { return "recorder"; }
  Status barrier() override { return Status::ok(); }
  Status record(Event* event) override {
    event->seq = issued_;
    event->log_end = int64_t(traffic().size());
    return Status::ok();
  }
  // Every wait is compute's: the recorded step stands for one rank's engine, and on the
  // host a wait for communication is exactly what compute would wait for.
  Status wait(const Event& event) override {
    log_->wait(event.seq);
    return Status::ok();
  }
  Status comm_waits_for_compute(void*) override { return Status::ok(); }
  Status compute_waits_for(const Event& event, void*) override { return wait(event); }
  Status set_progress(Progress) override { return Status::ok(); }
  Status bare(Coll, const void*, void*, size_t, DType, Group) override {
    return Status::error("the recording backend moves no data: nothing to time");
  }
  Status bare_synchronize() override { return Status::ok(); }

 protected:
  Status issue(const CollRecord& op, const void* send, void* recv, size_t) override {
    // The full buffer: a reduction's input, a gather's output (all-to-all: its input).
    const uintptr_t begin = reinterpret_cast<uintptr_t>(op.op == Coll::all_gather ? recv : send);
    const uintptr_t end = begin + op.bytes();
    const std::vector<ScheduleOp>& ops = log_->ops();
    for (; scanned_ < ops.size(); ++scanned_)
      if (ops[scanned_].kind == ScheduleOp::Kind::step) used_.clear();  // a new step
    CollRecord logged = op;
    for (const auto& [b, e] : used_) logged.reused_buffer = logged.reused_buffer || (begin < e && b < end);
    used_.emplace_back(begin, end);
    logged.reuse_bytes = reuse_distance(op, send, recv);
    log_->issue(++issued_, logged);
    return Status::ok();
  }

 private:
  using Range = std::pair<uintptr_t, uintptr_t>;

  // The ranges `op` touches, its spread one first (what zb_collectives --footprint cycles
  // through): in place its whole buffer; out of place its input, then its output.
  static std::vector<Range> ranges(const CollRecord& op, const void* send, const void* recv) {
    const uint64_t full = op.bytes(), block = full / uint64_t(std::max(1, op.ranks));
    const auto at = [](const void* p, uint64_t bytes) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(p);
      return Range{b, b + bytes};
    };
    if (op.in_place) return {at(op.op == Coll::all_gather ? recv : send, full)};
    return {at(send, op.op == Coll::all_gather ? block : full), at(recv, op.op == Coll::reduce_scatter ? block : full)};
  }

  // The distinct bytes every collective touched from the last one that touched `op`'s spread
  // range to `op`, both included; 0 when none did. Logged collectives of every step count, so
  // a step's first use of a buffer reaches back into the step before.
  uint64_t reuse_distance(const CollRecord& op, const void* send, const void* recv) {
    touched_.push_back(ranges(op, send, recv));
    std::vector<Range> seen = touched_.back();
    const Range key = seen.front();
    bool found = false;
    for (auto it = touched_.rbegin() + 1; it != touched_.rend() && !found; ++it) {
      for (const Range& r : *it) found = found || (r.first < key.second && key.first < r.second);
      seen.insert(seen.end(), it->begin(), it->end());
    }
    if (!found) return 0;
    std::sort(seen.begin(), seen.end());
    uint64_t bytes = 0;
    uintptr_t covered = 0;  // the union's end so far
    for (const auto& [b, e] : seen) {
      const uintptr_t from = std::max(b, covered);
      if (e > from) bytes += e - from;
      covered = std::max(covered, e);
    }
    return bytes;
  }

  ScheduleLog* log_;
  uint64_t issued_ = 0;
  size_t scanned_ = 0;                                // log ops looked at for step markers
  std::vector<std::pair<uintptr_t, uintptr_t>> used_;  // buffers this step's collectives used
  std::vector<std::vector<Range>> touched_;           // each collective's ranges, every step
};

}  // namespace

std::unique_ptr<Communicator> make_recording_communicator(const Topology& topo, ScheduleLog* log) {
  return std::make_unique<RecordingCommunicator>(topo, log);
}

}  // namespace zb
