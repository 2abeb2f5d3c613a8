// CPU stream: the queue, the communication thread, caller progress and its watchdog, shared by
// the CPU backends (mpi_backend.cc, gloo_backend.cc).
#include "harness/comm/cpu_stream.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace zb {
namespace {

constexpr double kParkAfterSeconds = 1.0;
// A waiter checks for completion this long before it sleeps: a small collective completes
// within it, and then nobody pays a futex sleep and wake-up (tens of microseconds on a
// virtual machine). Only where each rank has two cores, though (waiter_spin_seconds).
constexpr double kWaitSpinSeconds = 50e-6;
// How often a parked communication thread checks a collective running on the caller.
constexpr int kWatchMilliseconds = 50;

// After a timeout, how long and how often the communication thread is watched to tell a
// starved thread from a skipped collective.
constexpr double kStarvationProbeSeconds = 0.25;
constexpr int kStarvationSamples = 25;

// Whether thread `tid` of this process is running or waiting for a core (state R in
// /proc/self/task/TID/stat, the field after the name in parentheses); false where unreadable,
// with *ok false.
bool runnable(int tid, bool* ok) {
  *ok = false;
  if (tid <= 0) return false;
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  if (!close || close[1] != ' ' || close[2] == '\0') return false;
  *ok = true;
  return close[2] == 'R';
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

}  // namespace

// With fewer than two cores a rank, the spin holds the core that the collective it waits for
// needs. Measured while the communication thread ran at idle priority, where yielding did not
// hand it that core: with 2 ranks on 2 cores each ZeRO-3 gather started 40 to 70 us after its
// issue, and z3's median step over 10 runs took 6 ms longer than with no spin
// (docs/measurements.md). At the thread's normal priority the spin changed no stage's step by
// more than 0.35 ms either way (6 pairs of runs), so the rule stands.
double waiter_spin_seconds(int allowed_cores, int machine_cores, int ranks_on_machine) {
  return rank_has_two_cores(allowed_cores, machine_cores, ranks_on_machine) ? kWaitSpinSeconds : 0.0;
}

bool rank_has_two_cores(int allowed_cores, int machine_cores, int ranks_on_machine) {
  const int shared = std::max(1, machine_cores) / std::max(1, ranks_on_machine);
  return std::min(allowed_cores, shared) >= 2;
}

bool this_rank_has_two_cores(int ranks_on_machine) {
  return rank_has_two_cores(allowed_cores(), int(std::thread::hardware_concurrency()), ranks_on_machine);
}

CpuStreamCommunicator::CpuStreamCommunicator(const Topology& topo, double timeout_s)
    : Communicator(topo.rank, topo.size, timeout_s),
      wait_spin_s_(waiter_spin_seconds(allowed_cores(), int(std::thread::hardware_concurrency()),
                                       topo.device_ranks)) {
  set_groups(topo);
}

CpuStreamCommunicator::~CpuStreamCommunicator() { stop_stream(); }

void CpuStreamCommunicator::start_stream() { worker_ = std::thread([this] { loop(); }); }

void CpuStreamCommunicator::stop_stream() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

Status CpuStreamCommunicator::barrier() {
  Task task{CollRecord{Coll::all_reduce, 0, DType::f32}, nullptr, nullptr, 0, true};
  if (progress_ == Progress::caller) return run_on_caller(task);
  ZB_RETURN_IF_ERROR(enqueue(task));
  Event e;
  ZB_RETURN_IF_ERROR(record(&e));
  return wait(e);
}

Status CpuStreamCommunicator::record(Event* event) {
  event->seq = issued_;  // only the issuing thread changes issued_
  event->log_end = int64_t(traffic().size());
  return Status::ok();
}

Status CpuStreamCommunicator::wait(const Event& event) {
  if (completed_.load(std::memory_order_acquire) >= event.seq && !failed_.load()) return Status::ok();
  if (wait_spin_s_ > 0) {
    const double start = now_seconds();
    while (now_seconds() - start < wait_spin_s_) {
      if (completed_.load(std::memory_order_acquire) >= event.seq || failed_.load()) break;
      sched_yield();
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (sleepers_++ == 0 || event.seq < sleeper_seq_) sleeper_seq_ = event.seq;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  bool done = done_cv_.wait_until(lock, deadline, [&] {
    return completed_.load(std::memory_order_acquire) >= event.seq || failed_.load();
  });
  --sleepers_;
  if (failed_.load()) return failure_;
  if (!done) return timeout_error(what(running_), starvation());
  return Status::ok();
}

int CpuStreamCommunicator::sleeping_waiters() {
  std::lock_guard<std::mutex> lock(mu_);
  return sleepers_;
}

// A collective that outlasts the timeout on the communication thread may not be a rank's
// fault: other work on the same cores (other jobs, a loaded CI machine) can leave the thread
// too small a share of a core to finish in time. Told apart after the fact, over a short
// window: a starved thread is ready to run nearly all the time yet has a core for little of
// it. A thread blocked in the library for a peer is not ready to run; one polling for a peer
// on a core of its own has the core. (Watching around every wait would cost the waits being
// timed.) Empty when it was not starved, or where this cannot be read.
std::string CpuStreamCommunicator::starvation() {
  const int tid = worker_tid_.load(std::memory_order_acquire);
  clockid_t clock;
  if (tid <= 0 || !worker_.joinable() || pthread_getcpuclockid(worker_.native_handle(), &clock) != 0)
    return "";
  const double cpu0 = cpu_seconds(clock), t0 = now_seconds();
  int ready = 0;
  for (int i = 0; i < kStarvationSamples; ++i) {
    std::this_thread::sleep_for(
        std::chrono::duration<double>(kStarvationProbeSeconds / kStarvationSamples));
    bool ok = false;
    ready += runnable(tid, &ok) ? 1 : 0;
    if (!ok) return "";
  }
  const double cpu1 = cpu_seconds(clock), t1 = now_seconds();
  const double had_core = (cpu1 - cpu0) / (t1 - t0);
  // Ready in at least 4 samples of 5, with a core for at most a fifth of that. Not half: more
  // ranks than cores share them between their polling threads, each with half a core at 2 per
  // core, and then the rank that never came is still the cause.
  if (5 * ready < 4 * kStarvationSamples || had_core > 0.2 * ready / kStarvationSamples) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "rank %d's communication thread was ready to run for the next %.2f s but had a core "
                "for %.0f%% of it: other work holds the cores; free them or raise --timeout",
                rank_, t1 - t0, 100 * had_core);
  return buf;
}

Status CpuStreamCommunicator::set_progress(Progress progress) {
  ZB_RETURN_IF_ERROR(synchronize());
  progress_ = progress;
  caller_progress_.store(progress == Progress::caller, std::memory_order_relaxed);
  return Status::ok();
}

Status CpuStreamCommunicator::issue(const CollRecord& op, const void* send, void* recv,
                                    size_t log_index) {
  Task task{op, send, recv, 0, false, log_index, measure_wire_, record_times_};
  if (progress_ == Progress::thread) return enqueue(task);
  return run_on_caller(task);
}

// Caller progress: nothing is queued (set_progress drained the queue), so running it here
// keeps the stream's order. The communication thread, idle meanwhile, is its watchdog: a
// call still inside the library after the timeout (a rank skipped it) ends the job with a
// line naming it, since the caller itself cannot return from a library that does not time
// out (MPI) to say so. The caller only publishes which collective runs (its log entry, then
// its number: two plain stores on x86, no lock, no copy); the watchdog keeps the time, so
// the caller reads no clock (at 4 KiB a bare call takes a few microseconds, and each clock
// read ~0.1 of one).
Status CpuStreamCommunicator::run_on_caller(Task& task) {
  if (failed_.load()) return failure_;
  task.seq = ++issued_;
  caller_log_index_.store(task.barrier ? -1 : int64_t(task.log_index), std::memory_order_release);
  caller_seq_.store(task.seq, std::memory_order_release);
  // Nothing to measure or stretch: the library call alone, as bare() makes it.
  const bool plain = !task.barrier && !task.measure && !task.timed && int(task.op.op) != faults().slow_op;
  Status s = plain ? call(task.op.op, task.op.group, task.send, task.recv, task.op.count, task.op.dtype)
                   : execute(task);
  if (plain && !s) s = fail(s, task);
  caller_seq_.store(0, std::memory_order_release);
  completed_.store(task.seq, std::memory_order_release);
  return s;
}

// Run by the communication thread while it has no work of its own: the collective running
// on the caller, if the same one has been running for longer than the timeout, ends the job.
void CpuStreamCommunicator::watch_caller() {
  uint64_t seq = caller_seq_.load(std::memory_order_acquire);
  double now = now_seconds();
  if (seq == 0 || seq != watched_seq_) {
    watched_seq_ = seq;
    watched_since_ = now;
    return;
  }
  if (now - watched_since_ <= timeout_s_) return;
  const int64_t index = caller_log_index_.load(std::memory_order_acquire);
  // The caller publishes the entry before the number, so an unchanged number means the
  // entry read is that collective's.
  if (caller_seq_.load(std::memory_order_acquire) != seq) return;  // it has moved on
  Task task{};
  task.barrier = index < 0;
  if (index >= 0) task.op = traffic().record(size_t(index));
  timeout_handler_(timeout_error(what(task)));
}

std::string CpuStreamCommunicator::what(const Task& task) const {
  return task.barrier ? "rank " + std::to_string(rank_) + ": barrier" : describe(task.op);
}

Status CpuStreamCommunicator::enqueue(Task task) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return failure_;
    task.seq = ++issued_;
    queue_.push_back(task);
    queued_.fetch_add(1, std::memory_order_release);
    wake = parked_;
  }
  if (wake) work_cv_.notify_one();  // a polling thread needs no wake-up
  return Status::ok();
}

// Runs one collective and fills in its log entry: socket bytes written meanwhile (nothing
// else writes while a collective runs: compute never does, rank 0 prints only between
// benchmarks) and when it ran.
Status CpuStreamCommunicator::execute(const Task& task) {
  // Clocks and counters only where something asked for them: each read costs a fair share
  // of a small collective.
  const bool slow = !task.barrier && int(task.op.op) == faults().slow_op;
  const bool timed = task.timed || slow;
  int64_t w0 = task.measure ? process_write_bytes() : -1;
  double t0 = timed ? now_seconds() : -1;
  Status s = task.barrier ? barrier_call()
                          : call(task.op.op, task.op.group, task.send, task.recv, task.op.count,
                                 task.op.dtype);
  double t1 = timed ? now_seconds() : -1;
  if (slow) {
    // The planted regression: this op's own duration, stretched by busy-waiting.
    double until = t1 + faults().slow_fraction * (t1 - t0);
    while (now_seconds() < until) {
    }
    t1 = now_seconds();
  }
  if (!task.barrier && (task.measure || timed))
    traffic().complete(task.log_index, w0 >= 0 ? process_write_bytes() - w0 : -1, t0, t1);
  return s ? s : fail(s, task);
}

// The first failure is kept, with the collective it came from; every later call returns it.
Status CpuStreamCommunicator::fail(const Status& s, const Task& task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load()) {
    failure_ = s.context(what(task));
    failed_.store(true);
  }
  return failure_;
}

void CpuStreamCommunicator::loop() {
  // The thread runs at the rank's own priority and shares the cores with compute, as NCCL's
  // kernels share a GPU's SMs with the compute kernels: a collective issued during the
  // optimizer's update makes progress beside it (the update runs slower meanwhile), and a
  // finished collective hands back to compute at once. At idle priority (SCHED_IDLE) a
  // rank's update could hold the core where another rank's thread was queued for the whole
  // update: z1's wire wait read 3.6 ms, 1.2 ms at the rank's priority (medians of 10 runs,
  // docs/measurements.md). Polling yields at every turn, so any other thread on its core
  // runs first.
  // Named, so that top -H, perf and a scheduler trace tell it from the rank's own thread.
  pthread_setname_np(pthread_self(), "zb-comm");
  worker_tid_.store(int(syscall(SYS_gettid)), std::memory_order_release);
  for (;;) {
    Task task;
    poll_for_work();
    {
      std::unique_lock<std::mutex> lock(mu_);
      parked_ = true;
      while (!stop_ && queue_.empty()) {
        work_cv_.wait_for(lock, std::chrono::milliseconds(kWatchMilliseconds));
        watch_caller();
      }
      parked_ = false;
      if (queue_.empty()) return;
      task = queue_.front();
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
      running_ = task;
    }
    execute(task);
    completed_.store(task.seq, std::memory_order_release);
    // Only a waiter that gave up spinning needs the condition variable, and only once the
    // collective it awaits is done: a batch of collectives waited for at its end wakes its
    // waiter once, not once a collective (a wake-up is several microseconds, a small
    // collective not many more). Taking the lock first means the waiter is either asleep
    // (and woken) or will see completed_ when it checks.
    std::unique_lock<std::mutex> lock(mu_);
    if (sleepers_ > 0 && (task.seq >= sleeper_seq_ || failed_.load())) {
      wakeups_.fetch_add(1, std::memory_order_relaxed);
      done_cv_.notify_all();
    }
  }
}

// Waits for the next collective by polling, as NCCL's proxy and MPI's own progress do: a
// handoff then costs no system call and no wake-up of a parked core (tens of microseconds
// per collective on a virtual machine), and a core that a rank's compute leaves idle
// stays awake, in a compute-only step (which follows full ones well within
// kParkAfterSeconds) as in a full one, so both time the same machine. It yields at every
// turn, so a thread waking on the same core (the rank's compute, another rank's
// communication thread) runs first. After kParkAfterSeconds without work (between
// benchmarks) the thread parks on the condition variable.
void CpuStreamCommunicator::poll_for_work() {
  const double until = now_seconds() + kParkAfterSeconds;
  for (int spins = 0; queued_.load(std::memory_order_acquire) == 0; ++spins) {
    // Under caller progress there is nothing to poll for, and a spinning thread would only
    // take cycles from the ranks' own polling; it parks and watches.
    if (caller_progress_.load(std::memory_order_relaxed)) return;
    sched_yield();
    if (spins % 64 != 0) continue;
    watch_caller();
    if (stop_.load(std::memory_order_relaxed) || now_seconds() > until) return;
  }
}

}  // namespace zb
