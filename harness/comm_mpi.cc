// MPI backend: host buffers; one communication thread per rank plays the stream, executing
// queued collectives in order so the calling thread can compute meanwhile.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "harness/comm.h"
#include "harness/mpi_ops.h"

namespace zb {
namespace {

constexpr int kCommThreadNice = 10;
constexpr double kPollSeconds = 1.0;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size, double timeout_s)
      : Communicator(rank, size, timeout_s), comm_(comm) {
    worker_ = std::thread([this] { loop(); });
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
    MPI_Comm_free(&comm_);
  }

  Backend backend() const override { return Backend::mpi; }
  MemKind memKind() const override { return MemKind::host; }
  std::string libraryVersion() const override { return mpi_library_version(); }

  Status barrier() override {
    Event e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Task{CollRecord{Coll::all_reduce, 0, DType::f32}, nullptr, nullptr,
                            ++issued_, true});
      queued_.fetch_add(1, std::memory_order_release);
      e.seq = issued_;
    }
    cv_.notify_all();
    return wait(e);
  }

  Status record(Event* event) override {
    std::lock_guard<std::mutex> lock(mu_);
    event->seq = issued_;
    return Status::ok();
  }

  Status afterCompute(void*) override { return Status::ok(); }
  Status computeAfter(const Event& event, void*) override { return wait(event); }

  Status wait(const Event& event) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(timeout_s_);
    bool done = done_cv_.wait_until(lock, deadline, [&] {
      return completed_ >= event.seq || !failure_.is_ok();
    });
    if (!failure_.is_ok()) return failure_;
    if (!done) {
      std::string what = running_.barrier ? "rank " + std::to_string(rank_) + ": barrier"
                                          : describe(running_.op);
      return Status::error("timeout: " + what + " did not complete within " +
                           format_seconds(timeout_s_) +
                           " s (a rank skipped or never reached this collective)");
    }
    return Status::ok();
  }

 protected:
  Status issue(const CollRecord& op, const void* send, void* recv, size_t log_index) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.is_ok()) return failure_;
      queue_.push_back(Task{op, send, recv, ++issued_, false, log_index, measure_wire_});
      queued_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    return Status::ok();
  }

 private:
  struct Task {
    CollRecord op;
    const void* send;
    void* recv;
    uint64_t seq;
    bool barrier;
    size_t log_index = 0;
    bool measure = false;
  };

  static std::string format_seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return buf;
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
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = queue_.front();
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
        running_ = task;
      }
      // Nothing else writes while a collective runs (compute never does, rank 0 prints only
      // between benchmarks), so the process-wide counter is this collective's own traffic.
      int64_t w0 = task.measure ? process_write_bytes() : -1;
      double t0 = now_seconds();
      Status s = task.barrier ? barrier_now() : execute(task);
      double t1 = now_seconds();
      if (!task.barrier && int(task.op.op) == faults().slow_op) {
        // The planted regression: this op's own duration, stretched by busy-waiting.
        double until = t1 + faults().slow_fraction * (t1 - t0);
        while (now_seconds() < until) {
        }
        t1 = now_seconds();
      }
      if (!task.barrier)
        traffic().complete(task.log_index, w0 >= 0 ? process_write_bytes() - w0 : -1, t0, t1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!s.is_ok() && failure_.is_ok())
          failure_ = s.context(task.barrier ? "rank " + std::to_string(rank_) + ": barrier"
                                            : describe(task.op));
        completed_ = task.seq;
      }
      done_cv_.notify_all();
    }
  }

  // Waits for the next collective by polling, as NCCL's proxy and MPI's own progress do: a
  // handoff then costs no system call and no wake-up of a parked core (tens of microseconds
  // per collective on a virtual machine), and a core that a rank's compute leaves idle
  // stays awake, in a compute-only step (which follows full ones well within kPollSeconds)
  // as in a full one, so both time the same machine. At idle priority the polling takes
  // only cycles nobody else wants (where SCHED_IDLE is refused, nice 10 gives it about a
  // tenth of a contended core), and it yields, so another rank's communication thread on
  // the same core runs first. After kPollSeconds without work (between benchmarks) the
  // thread parks on the condition variable.
  void poll_for_work() {
    const double until = now_seconds() + kPollSeconds;
    for (int spins = 0; queued_.load(std::memory_order_acquire) == 0; ++spins) {
      sched_yield();
      if (spins % 64 == 0 && (stop_.load(std::memory_order_relaxed) || now_seconds() > until)) return;
    }
  }

  Status barrier_now() {
    ZB_MPI_CHECK(MPI_Barrier(comm_));
    return Status::ok();
  }

  Status execute(const Task& t) {
    MPI_Datatype type = mpi_datatype(t.op.dtype);
    MPI_Op sum = mpi_sum_op(t.op.dtype);
    int n = size_;
    uint64_t block = t.op.op == Coll::all_reduce ? t.op.count : t.op.count / uint64_t(n);
    if (block > uint64_t(INT32_MAX))
      return Status::error("count " + std::to_string(block) +
                           " exceeds MPI's int count; use smaller buffers");
    int count = int(block);
    const void* send = t.send == t.recv ? MPI_IN_PLACE : t.send;
    switch (t.op.op) {
      case Coll::all_reduce:
        ZB_MPI_CHECK(MPI_Allreduce(send, t.recv, count, type, sum, comm_));
        break;
      case Coll::reduce_scatter: {
        // MPI_Reduce_scatter with equal counts rather than _block: Open MPI has a ring
        // algorithm for the former only, and the ring is what moves the ideal bytes.
        std::vector<int> counts(size_t(n), count);
        size_t esz = dtype_size(t.op.dtype);
        char* own = static_cast<char*>(const_cast<void*>(t.send)) + size_t(rank_) * block * esz;
        if (t.recv == own) {
          // NCCL's in-place form (recv is this rank's block of send). MPI's in-place form
          // leaves the result at the front of the buffer, so move it to the rank's block.
          ZB_MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, const_cast<void*>(t.send), counts.data(),
                                          type, sum, comm_));
          if (rank_ != 0) std::memmove(own, t.send, block * esz);
        } else {
          ZB_MPI_CHECK(MPI_Reduce_scatter(t.send, t.recv, counts.data(), type, sum, comm_));
        }
        break;
      }
      case Coll::all_gather: {
        const void* s = t.send == static_cast<char*>(t.recv) + size_t(rank_) * block *
                                                                     dtype_size(t.op.dtype)
                            ? MPI_IN_PLACE
                            : t.send;
        ZB_MPI_CHECK(MPI_Allgather(s, count, type, t.recv, count, type, comm_));
        break;
      }
    }
    return Status::ok();
  }

  MPI_Comm comm_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Task> queue_;
  Task running_{};
  uint64_t issued_ = 0, completed_ = 0;
  std::atomic<bool> stop_{false};   // set under mu_; the polling loop reads it lock-free
  Status failure_;
  std::atomic<int64_t> queued_{0};  // tasks in queue_, readable without the lock
};

}  // namespace

Status make_mpi_communicator(MPI_Comm world, double timeout_s, std::unique_ptr<Communicator>* out) {
  int provided = 0;
  ZB_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    return Status::error("the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                         "communication thread needs");
  MPI_Comm comm;
  ZB_MPI_CHECK(MPI_Comm_dup(world, &comm));
  ZB_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  ZB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ZB_MPI_CHECK(MPI_Comm_size(comm, &size));
  ZB_RETURN_IF_ERROR(init_mpi_ops());
  *out = std::make_unique<MpiCommunicator>(comm, rank, size, timeout_s);
  return Status::ok();
}

}  // namespace zb
