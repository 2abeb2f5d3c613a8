// MPI backend: host buffers. Collectives run on the caller's thread (Progress::caller) or on a
// communication thread per rank that plays the stream (Progress::thread), executing queued
// collectives in order so the calling thread can compute meanwhile.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/mpi_ops.h"
#include "harness/comm/topology.h"

namespace zb {
namespace {

constexpr int kCommThreadNice = 10;
constexpr double kParkAfterSeconds = 1.0;
// A waiter checks for completion this long before it sleeps: a small collective completes
// within it, and then nobody pays a futex sleep and wake-up (tens of microseconds on a
// virtual machine). It yields meanwhile, so a communication thread sharing its core runs.
constexpr double kWaitSpinSeconds = 50e-6;
// How often a parked communication thread checks a collective running on the caller.
constexpr int kWatchMilliseconds = 50;

// One collective's MPI call. Shared by the queued path, the caller path and the bare
// baseline, so all three issue exactly the same library call.
class MpiCalls {
 public:
  MpiCalls(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  Status run(Coll op, const void* send, void* recv, uint64_t count, DType dtype) {
    MPI_Datatype type = mpi_datatype(dtype);
    MPI_Op sum = mpi_sum_op(dtype);
    uint64_t block = op == Coll::all_reduce ? count : count / uint64_t(size_);
    if (block > uint64_t(INT32_MAX))
      return Status::error("count " + std::to_string(block) +
                           " exceeds MPI's int count; use smaller buffers");
    int n = int(block);
    const size_t esz = dtype_size(dtype);
    switch (op) {
      case Coll::all_reduce:
        ZB_MPI_CHECK(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, type, sum, comm_));
        break;
      case Coll::reduce_scatter: {
        // MPI_Reduce_scatter with equal counts rather than _block: Open MPI has a ring
        // algorithm for the former only, and the ring is what moves the ideal bytes.
        if (counts_.empty() || counts_[0] != n) counts_.assign(size_t(size_), n);
        char* own = static_cast<char*>(const_cast<void*>(send)) + size_t(rank_) * block * esz;
        if (recv == own) {
          // NCCL's in-place form (recv is this rank's block of send). MPI's in-place form
          // leaves the result at the front of the buffer, so move it to the rank's block.
          ZB_MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, const_cast<void*>(send), counts_.data(),
                                          type, sum, comm_));
          if (rank_ != 0) std::memmove(own, send, block * esz);
        } else {
          ZB_MPI_CHECK(MPI_Reduce_scatter(send, recv, counts_.data(), type, sum, comm_));
        }
        break;
      }
      case Coll::all_gather: {
        bool in_place = send == static_cast<char*>(recv) + size_t(rank_) * block * esz;
        ZB_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, comm_));
        break;
      }
      case Coll::all_to_all:
        ZB_MPI_CHECK(MPI_Alltoall(send, n, type, recv, n, type, comm_));
        break;
    }
    return Status::ok();
  }

 private:
  MPI_Comm comm_;
  int rank_, size_;
  std::vector<int> counts_;  // reduce-scatter's per-rank counts, kept between calls
};

// One communicator per Group (the world, this rank's node, its cross-node group), with the
// ranks in the group's own order.
struct GroupComms {
  MPI_Comm comm[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const GroupComms& groups, const Topology& topo, double timeout_s)
      : Communicator(topo.rank, topo.size, timeout_s), comm_(groups.comm[0]), groups_comm_(groups) {
    set_groups(topo);
    for (Group g : {Group::world, Group::node, Group::cross})
      calls_.emplace_back(groups.comm[int(g)], group_rank(g), group_size(g));
    worker_ = std::thread([this] { loop(); });
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
    for (MPI_Comm& c : groups_comm_.comm) MPI_Comm_free(&c);
  }

  Backend backend() const override { return Backend::mpi; }
  MemKind mem_kind() const override { return MemKind::host; }
  std::string library_version() const override { return mpi_library_version(); }

  Status barrier() override {
    Task task{CollRecord{Coll::all_reduce, 0, DType::f32}, nullptr, nullptr, 0, true};
    if (progress_ == Progress::caller) return run_on_caller(task);
    ZB_RETURN_IF_ERROR(enqueue(task));
    Event e;
    ZB_RETURN_IF_ERROR(record(&e));
    return wait(e);
  }

  Status record(Event* event) override {
    event->seq = issued_;  // only the issuing thread changes issued_
    event->log_end = int64_t(traffic().size());
    return Status::ok();
  }

  Status comm_waits_for_compute(void*) override { return Status::ok(); }
  Status compute_waits_for(const Event& event, void*) override { return wait(event); }

  Status wait(const Event& event) override {
    if (completed_.load(std::memory_order_acquire) >= event.seq && !failed_.load()) return Status::ok();
    const double start = now_seconds();
    while (now_seconds() - start < kWaitSpinSeconds) {
      if (completed_.load(std::memory_order_acquire) >= event.seq || failed_.load()) break;
      sched_yield();
    }
    std::unique_lock<std::mutex> lock(mu_);
    ++sleepers_;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    bool done = done_cv_.wait_until(lock, deadline, [&] {
      return completed_.load(std::memory_order_acquire) >= event.seq || failed_.load();
    });
    --sleepers_;
    if (failed_.load()) return failure_;
    if (!done) return timeout_error(what(running_));
    return Status::ok();
  }

  Status set_progress(Progress progress) override {
    ZB_RETURN_IF_ERROR(synchronize());
    progress_ = progress;
    caller_progress_.store(progress == Progress::caller, std::memory_order_relaxed);
    return Status::ok();
  }

  Status bare(Coll op, const void* send, void* recv, size_t count, DType dtype, Group group) override {
    return calls_[size_t(group)].run(op, send, recv, count, dtype);
  }
  Status bare_synchronize() override { return Status::ok(); }  // MPI calls block

 protected:
  Status issue(const CollRecord& op, const void* send, void* recv, size_t log_index) override {
    Task task{op, send, recv, 0, false, log_index, measure_wire_, record_times_};
    if (progress_ == Progress::thread) return enqueue(task);
    return run_on_caller(task);
  }

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

  // Caller progress: nothing is queued (set_progress drained the queue), so running it here
  // keeps the stream's order. The communication thread, idle meanwhile, is its watchdog: a
  // call still inside MPI after the timeout (a rank skipped it) ends the job with a line
  // naming it, since the caller itself cannot return from MPI to say so. The caller only
  // publishes which collective runs (its log entry, then its number: two plain stores on
  // x86, no lock, no copy); the watchdog keeps the time, so the caller reads no clock (at
  // 4 KiB a bare call takes a few microseconds, and each clock read ~0.1 of one).
  Status run_on_caller(Task& task) {
    if (failed_.load()) return failure_;
    task.seq = ++issued_;
    caller_log_index_.store(task.barrier ? -1 : int64_t(task.log_index), std::memory_order_release);
    caller_seq_.store(task.seq, std::memory_order_release);
    // Nothing to measure or stretch: the library call alone, as bare() makes it.
    const bool plain = !task.barrier && !task.measure && !task.timed && int(task.op.op) != faults().slow_op;
    Status s = plain ? calls_[size_t(task.op.group)].run(task.op.op, task.send, task.recv, task.op.count, task.op.dtype)
                     : execute(task);
    if (plain && !s) s = fail(s, task);
    caller_seq_.store(0, std::memory_order_release);
    completed_.store(task.seq, std::memory_order_release);
    return s;
  }

  // Run by the communication thread while it has no work of its own: the collective running
  // on the caller, if the same one has been running for longer than the timeout, ends the job.
  void watch_caller() {
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

  std::string what(const Task& task) const {
    return task.barrier ? "rank " + std::to_string(rank_) + ": barrier" : describe(task.op);
  }

  Status barrier_call() {
    ZB_MPI_CHECK(MPI_Barrier(comm_));
    return Status::ok();
  }

  Status enqueue(Task task) {
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
  Status execute(const Task& task) {
    // Clocks and counters only where something asked for them: each read costs a fair share
    // of a small collective.
    const bool slow = !task.barrier && int(task.op.op) == faults().slow_op;
    const bool timed = task.timed || slow;
    int64_t w0 = task.measure ? process_write_bytes() : -1;
    double t0 = timed ? now_seconds() : -1;
    Status s = task.barrier ? barrier_call()
                            : calls_[size_t(task.op.group)].run(task.op.op, task.send, task.recv,
                                                                task.op.count, task.op.dtype);
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
  Status fail(const Status& s, const Task& task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.load()) {
      failure_ = s.context(what(task));
      failed_.store(true);
    }
    return failure_;
  }

  void loop() {
    // MPI progresses by polling, so a waiting collective keeps a core busy. On a CPU the
    // rank's compute comes first, as a GPU's kernels do, and communication takes the
    // cycles compute leaves idle (SCHED_IDLE): otherwise a rank's polling thread preempts
    // its own compute, and its peers', for as long as it waits.
    sched_param idle{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0)
      setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), kCommThreadNice);
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
      // Only a waiter that gave up spinning needs the condition variable; taking the lock
      // first means it is either asleep (and woken) or will see completed_ when it checks.
      std::unique_lock<std::mutex> lock(mu_);
      if (sleepers_ > 0) done_cv_.notify_all();
    }
  }

  // Waits for the next collective by polling, as NCCL's proxy and MPI's own progress do: a
  // handoff then costs no system call and no wake-up of a parked core (tens of microseconds
  // per collective on a virtual machine), and a core that a rank's compute leaves idle
  // stays awake, in a compute-only step (which follows full ones well within
  // kParkAfterSeconds) as in a full one, so both time the same machine. At idle priority the
  // polling takes only cycles nobody else wants (where SCHED_IDLE is refused, nice 10 gives
  // it about a tenth of a contended core), and it yields, so another rank's communication
  // thread on the same core runs first. After kParkAfterSeconds without work (between
  // benchmarks) the thread parks on the condition variable.
  void poll_for_work() {
    const double until = now_seconds() + kParkAfterSeconds;
    for (int spins = 0; queued_.load(std::memory_order_acquire) == 0; ++spins) {
      // Under caller progress there is nothing to poll for, and a spinning thread would only
      // take cycles from the ranks' own MPI polling; it parks and watches.
      if (caller_progress_.load(std::memory_order_relaxed)) return;
      sched_yield();
      if (spins % 64 != 0) continue;
      watch_caller();
      if (stop_.load(std::memory_order_relaxed) || now_seconds() > until) return;
    }
  }

  MPI_Comm comm_;            // the world's: barriers
  GroupComms groups_comm_;
  std::vector<MpiCalls> calls_;  // by Group
  Progress progress_ = Progress::thread;
  std::thread worker_;
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
  int sleepers_ = 0;                      // under mu_: waiters asleep on done_cv_
};

}  // namespace

Status make_mpi_communicator(MPI_Comm world, const Topology& topo, double timeout_s,
                             std::unique_ptr<Communicator>* out) {
  int provided = 0;
  ZB_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    return Status::error("the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                         "communication thread needs");
  GroupComms g;
  ZB_RETURN_IF_ERROR(dup_comm(world, &g.comm[int(Group::world)]));
  // Split from the duplicate, keyed as Topology::members orders each group.
  ZB_MPI_CHECK(MPI_Comm_split(g.comm[0], topo.node, topo.local_rank, &g.comm[int(Group::node)]));
  ZB_MPI_CHECK(MPI_Comm_split(g.comm[0], topo.local_rank, topo.node, &g.comm[int(Group::cross)]));
  for (int i = 1; i < 3; ++i) ZB_MPI_CHECK(MPI_Comm_set_errhandler(g.comm[i], MPI_ERRORS_RETURN));
  ZB_RETURN_IF_ERROR(init_mpi_ops());
  *out = std::make_unique<MpiCommunicator>(g, topo, timeout_s);
  return Status::ok();
}

}  // namespace zb
