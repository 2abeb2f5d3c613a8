// CPU stream: the progress engine of a backend whose collectives are blocking library calls on
// host buffers (MPI, Gloo). Collectives run on the caller's thread (Progress::caller) or on a
// communication thread per rank that plays the stream (Progress::thread), executing queued
// collectives in order so the calling thread can compute meanwhile. A backend provides only
// the library's call for one collective and for a barrier.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "harness/comm/communicator.h"

namespace zb {

// Whether a rank has two cores, one for its calling thread and one for its communication
// thread, among those it may run on (`allowed_cores`) and in its share of the machine's.
bool rank_has_two_cores(int allowed_cores, int machine_cores, int ranks_on_machine);
// The same for this process: its affinity, the machine's cores.
bool this_rank_has_two_cores(int ranks_on_machine);

// How long a rank waiting for a collective checks for its end before it sleeps: 50 us where
// the rank has two cores (rank_has_two_cores); else none.
double waiter_spin_seconds(int allowed_cores, int machine_cores, int ranks_on_machine);

class CpuStreamCommunicator : public Communicator {
 public:
  ~CpuStreamCommunicator() override;

  MemKind mem_kind() const override { return MemKind::host; }
  Status barrier() override;
  Status record(Event* event) override;
  Status wait(const Event& event) override;
  // CPU compute has finished when its call returns: nothing to order, and compute waiting for
  // communication is the host's wait().
  Status comm_waits_for_compute(void*) override { return Status::ok(); }
  Status compute_waits_for(const Event& event, void*) override { return wait(event); }
  Status set_progress(Progress progress) override;
  Status bare(Coll op, const void* send, void* recv, size_t count, DType dtype, Group group) override {
    return call(op, group, send, recv, count, dtype);
  }
  Status bare_synchronize() override { return Status::ok(); }  // the calls block

 protected:
  CpuStreamCommunicator(const Topology& topo, double timeout_s);
  // The communication thread: started once the backend can take calls (the end of its
  // constructor), stopped before it frees what call() uses (the start of its destructor).
  void start_stream();
  void stop_stream();

  // One collective's library call over `group` (counts as Communicator's: `count` the full
  // buffer), shared by the queued path, the caller path and bare(), so all three issue exactly
  // the same call; and the barrier's.
  virtual Status call(Coll op, Group group, const void* send, void* recv, uint64_t count,
                      DType dtype) = 0;
  virtual Status barrier_call() = 0;

  Status issue(const CollRecord& op, const void* send, void* recv, size_t log_index) override;

  // For tests: waiters asleep now, and how often the communication thread has woken them.
  int sleeping_waiters();
  uint64_t waiter_wakeups() const { return wakeups_.load(); }

 private:
  struct Task {
    CollRecord op;
    const void* send;
    void* recv;
    uint64_t seq;
    bool barrier;
    size_t log_index = 0;
    bool measure = false;  // read the socket write counter around it
    bool timed = false;    // record when it ran, for the trace
  };

  Status run_on_caller(Task& task);
  void watch_caller();
  std::string what(const Task& task) const;
  Status enqueue(Task task);
  Status execute(const Task& task);
  Status fail(const Status& s, const Task& task);
  void loop();
  void poll_for_work();
  std::string starvation();

  Progress progress_ = Progress::thread;
  std::thread worker_;
  std::atomic<int> worker_tid_{0};        // the communication thread's id, once it runs
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Task> queue_;
  Task running_{};
  uint64_t issued_ = 0;                   // by the issuing thread only
  std::atomic<uint64_t> completed_{0};
  std::atomic<int64_t> queued_{0};        // tasks in queue_, readable without the lock
  std::atomic<bool> stop_{false};         // set under mu_; the polling loop reads it lock-free
  std::atomic<bool> failed_{false};
  Status failure_;                        // under mu_ once failed_ is set
  bool parked_ = false;                   // under mu_
  std::atomic<bool> caller_progress_{false};
  std::atomic<int64_t> caller_log_index_{-1};  // the collective running on the caller: its
                                               // log entry (-1: a barrier),
  std::atomic<uint64_t> caller_seq_{0};   // and its number (0: none)
  uint64_t watched_seq_ = 0;              // the watchdog's: what it saw running, since when
  double watched_since_ = 0;
  int sleepers_ = 0;                      // under mu_: waiters asleep on done_cv_,
  uint64_t sleeper_seq_ = 0;              // and at most the first collective any awaits
  std::atomic<uint64_t> wakeups_{0};      // notifications of done_cv_
  const double wait_spin_s_;              // how long a waiter checks before it sleeps
};

}  // namespace zb
