// Compute waiting for communication, timed where it happens: a step's exposed communication,
// and each wait on the host kept with the collective it waited for, so that it can be split
// into waiting for a late rank and waiting for the wire. Every step schedule (the ZeRO step,
// the pipeline step) measures its waits through it; the pipeline step also asks which came
// after its last backward.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/compute/compute.h"
#include "harness/core/trace.h"

namespace zb {

class LayerCompute;

// One wait of compute for communication, timed on the host (steady clock).
struct WaitRecord {
  double start_s = 0, end_s = 0;
  // The traffic-log entry of the last collective it waited for (collectives complete in
  // order, so every one before it too); -1 when none had been issued.
  int64_t awaits = -1;
};

// A wait by cause. A collective cannot finish before its last rank has issued it: the part of
// the wait before that (`skew_s`) is waiting for a late rank, the rest (`wire_s`) waiting for
// the transfer itself and its hand-off back to compute. Of the wire part, `late_finish_s` is
// how much later this rank's collective ended than the first rank's: the same transfer done
// elsewhere, this rank's own progress behind (on CPUs, its communication thread without a
// core), not the wire's speed.
struct WaitSplit {
  double skew_s = 0, wire_s = 0, late_finish_s = 0;
};
// `last_issue_s`: when the last rank issued the awaited collective, on this rank's clock;
// `late_finish_s`: how much later it ended here than on the first rank to finish it, counted
// within the wire part (so a wait that began after that first finish counts its hand-off too).
WaitSplit split_wait(const WaitRecord& wait, double last_issue_s, double late_finish_s = 0);

class ComputeWaits {
 public:
  ComputeWaits(Communicator& comm, Compute& compute, Trace& trace)
      : comm_(comm), compute_(compute), trace_(trace) {}

  // Whether the host waits in place of the engine: always with CPU kernels, and with sleep
  // compute, where the host stands in for an accelerator.
  void set_host_waits(bool host) { host_ = host || compute_.kind() != MemKind::device; }
  bool host_waits() const { return host_; }
  // Sleep compute that keeps to a schedule learns of every wait (LayerCompute::waited).
  void set_layer_compute(LayerCompute* lc) { layer_compute_ = lc; }
  void begin_step();
  // From here on, waits also count as the tail (communication left after the last backward).
  void begin_tail() { tail_ = true; }
  // Compute queued from now on starts once `e` is complete. The host waits and times it
  // (traced as a wait span, kept in step_waits()), or the engine's stream waits between two
  // marks; on a stream the host first waits for the event the previous wait named, so it runs
  // at most one wait ahead and a lost collective becomes a timeout error here.
  Status after(const Event& e);
  // Once the engine has passed every mark of the step (it was synchronised): the step's
  // waits in seconds, all of them and those of the tail.
  Status totals(double* exposed_s, double* tail_s);
  // The step's waits on the host, in order (empty where the engine's stream waits).
  const std::vector<WaitRecord>& step_waits() const { return waits_; }

 private:
  Communicator& comm_;
  Compute& compute_;
  Trace& trace_;
  LayerCompute* layer_compute_ = nullptr;
  bool host_ = true, tail_ = false;
  double host_s_ = 0, host_tail_s_ = 0;
  size_t marks_ = 0;
  std::vector<bool> pair_in_tail_;
  std::vector<WaitRecord> waits_;
  Event stream_awaited_;
};

}  // namespace zb
