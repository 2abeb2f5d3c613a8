// Compute waiting for communication, timed where it happens: a step's exposed communication.
// Every step schedule (the ZeRO step, the pipeline step) measures its waits through it; the
// pipeline step also asks which came after its last backward.
#pragma once

#include <vector>

#include "harness/comm/communicator.h"
#include "harness/compute/compute.h"
#include "harness/core/trace.h"

namespace zb {

class ComputeWaits {
 public:
  ComputeWaits(Communicator& comm, Compute& compute, Trace& trace)
      : comm_(comm), compute_(compute), trace_(trace) {}

  // Whether the host waits in place of the engine: always with CPU kernels, and with sleep
  // compute, where the host stands in for an accelerator.
  void set_host_waits(bool host) { host_ = host || compute_.kind() != MemKind::device; }
  void begin_step();
  // From here on, waits also count as the tail (communication left after the last backward).
  void begin_tail() { tail_ = true; }
  // Compute queued from now on starts once `e` is complete. The host waits and times it
  // (traced as a wait span), or the engine's stream waits between two marks; on a stream the
  // host first waits for the event the previous wait named, so it runs at most one wait ahead
  // and a lost collective becomes a timeout error here.
  Status after(const Event& e);
  // Once the engine has passed every mark of the step (it was synchronised): the step's
  // waits in seconds, all of them and those of the tail.
  Status totals(double* exposed_s, double* tail_s);

 private:
  Communicator& comm_;
  Compute& compute_;
  Trace& trace_;
  bool host_ = true, tail_ = false;
  double host_s_ = 0, host_tail_s_ = 0;
  size_t marks_ = 0;
  std::vector<bool> pair_in_tail_;
  Event stream_awaited_;
};

}  // namespace zb
