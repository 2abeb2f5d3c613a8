// The CPU streams. The copy engine: jobs run in queue order, a ticket's wait sees everything
// before it, the statistics count each copy once, and a failing job's error comes back to the
// waiter. The communication stream's waiter: whether it checks for the collective's end before
// it sleeps, and that a batch waited for at its end wakes it once. Which thread runs what: the workers are named (zb-copy, zb-comm) for top -H, perf
// and traces. And the communication stream's timeout line names its cause: starved of a core
// (here busy threads leave it a ninth of its only core), the line says so and does not blame a
// rank; blocked in the library for a peer, it blames the rank that never came, as before.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "harness/comm/cpu_stream.h"
#include "harness/compute/copy_engine.h"

namespace zb {
namespace {

TEST(CopyEngine, RunsJobsInOrderAndWaitSeesEverythingBefore) {
  std::unique_ptr<CopyEngine> e;
  ASSERT_TRUE(CopyEngine::create(MemKind::host, &e).is_ok());
  std::vector<int> src(1000), mid(1000), dst(1000);
  std::iota(src.begin(), src.end(), 7);
  std::atomic<int> step{0};
  e->wait_for([&] { return step.load() == 0 ? (step = 1, Status::ok()) : Status::error("out of order"); });
  e->copy(mid.data(), src.data(), 4000, CopyDir::d2h);
  // The host job reads what the copy before it wrote.
  e->host([&] { return mid[999] == 1006 ? Status::ok() : Status::error("copy not done"); });
  CopyEngine::Ticket last = e->copy(dst.data(), mid.data(), 4000, CopyDir::h2d);
  ASSERT_TRUE(e->wait(last).is_ok());
  EXPECT_EQ(dst, src);
  CopyStats s = e->take_stats();
  EXPECT_EQ(s.copies, 2);
  EXPECT_EQ(s.d2h_bytes, 4000);
  EXPECT_EQ(s.h2d_bytes, 4000);
  EXPECT_EQ(e->take_stats().copies, 0);  // taken once
}

TEST(CopyEngine, ItsWorkerIsNamed) {
  std::unique_ptr<CopyEngine> e;
  ASSERT_TRUE(CopyEngine::create(MemKind::host, &e).is_ok());
  char name[16] = {};
  e->host([&] {
    return pthread_getname_np(pthread_self(), name, sizeof name) == 0 ? Status::ok() : Status::error("no name");
  });
  ASSERT_TRUE(e->synchronize().is_ok());
  EXPECT_STREQ(name, "zb-copy");
}

TEST(CopyEngine, AFailingJobIsReportedToTheWaiter) {
  std::unique_ptr<CopyEngine> e;
  ASSERT_TRUE(CopyEngine::create(MemKind::host, &e).is_ok());
  e->host([] { return Status::error("planted"); });
  Status s = e->synchronize();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("planted"), std::string::npos);
}

TEST(CopyEngine, TracesCopiesAndHostJobsOnTheCopyTrack) {
  std::unique_ptr<CopyEngine> e;
  ASSERT_TRUE(CopyEngine::create(MemKind::host, &e).is_ok());
  char a[64] = {1}, b[64];
  e->set_trace(true);
  e->copy(b, a, 64, CopyDir::d2h, "d2h c0", "\"fill\": 0");
  e->wait_for([] { return Status::ok(); });  // a wait is not work: no span
  e->host([] { return Status::ok(); }, "add c0");
  ASSERT_TRUE(e->synchronize().is_ok());
  std::vector<TraceSpan> spans = e->take_spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "d2h c0");
  EXPECT_EQ(spans[0].track, Track::copy);
  EXPECT_LE(spans[0].end_s, spans[1].start_s);
}

TEST(CpuStream, WaiterSpinsOnlyWhereEachRankHasTwoCores) {
  // 2 ranks unbound on 2 cores (this project's CI machine): one core each, no spin.
  EXPECT_FALSE(rank_has_two_cores(2, 2, 2));
  EXPECT_EQ(waiter_spin_seconds(2, 2, 2), 0.0);
  // One rank alone on 2 cores, and 8 ranks unbound on 64: two cores or more each.
  EXPECT_TRUE(rank_has_two_cores(2, 2, 1));
  EXPECT_EQ(waiter_spin_seconds(2, 2, 1), 50e-6);
  EXPECT_TRUE(rank_has_two_cores(64, 64, 8));
  EXPECT_EQ(waiter_spin_seconds(64, 64, 8), 50e-6);
  // Bound to one core (mpirun --bind-to core), however large the machine.
  EXPECT_FALSE(rank_has_two_cores(1, 64, 8));
  // More ranks than cores, and nothing known of the machine.
  EXPECT_FALSE(rank_has_two_cores(2, 2, 4));
  EXPECT_FALSE(rank_has_two_cores(1, 0, 0));
}

// A one-rank CPU stream whose library call only notes the thread it runs on.
class ThreadNoting final : public CpuStreamCommunicator {
 public:
  ThreadNoting() : CpuStreamCommunicator(Topology{}, 10.0) { start_stream(); }
  ~ThreadNoting() override { stop_stream(); }
  Backend backend() const override { return Backend::mpi; }
  std::string library_version() const override { return "none"; }
  std::string called_on;

 protected:
  Status call(Coll, Group, const void*, void*, uint64_t, DType) override {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    called_on = name;
    return Status::ok();
  }
  Status barrier_call() override { return Status::ok(); }
};

TEST(CpuStream, CollectivesRunOnANamedThreadUnderThreadProgress) {
  ThreadNoting comm;
  float x = 1, y = 0;
  ASSERT_TRUE(comm.set_progress(Progress::thread).is_ok());
  ASSERT_TRUE(comm.all_reduce(&x, &y, 1, DType::f32).is_ok());
  ASSERT_TRUE(comm.synchronize().is_ok());
  EXPECT_EQ(comm.called_on, "zb-comm");
  // Under caller progress the call runs on the caller's own thread.
  char caller[16] = {};
  pthread_getname_np(pthread_self(), caller, sizeof caller);
  ASSERT_TRUE(comm.set_progress(Progress::caller).is_ok());
  ASSERT_TRUE(comm.all_reduce(&x, &y, 1, DType::f32).is_ok());
  EXPECT_EQ(comm.called_on, caller);
}

constexpr double kTimeoutSeconds = 0.3;
// Busy threads beside the polling one on its core: a fair scheduler leaves it 1/(kHogs + 1) of
// the core, well under the fifth that starvation() calls starved.
constexpr int kHogs = 8;

// A one-rank stream whose collectives do not end until release(): each either polls (as an MPI
// library waiting for a peer does) on one core shared with kHogs busy threads, or sleeps in a
// blocking wait (as a library blocked on a socket does).
class Stuck final : public CpuStreamCommunicator {
 public:
  enum class How { poll_on_a_busy_core, block };
  explicit Stuck(How how, double timeout_s = kTimeoutSeconds)
      : CpuStreamCommunicator(Topology{}, timeout_s), how_(how) {
    // The hogs start here, on the test's thread, at its priority.
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    CPU_ZERO(&one_);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &all)) {
        CPU_SET(c, &one_);  // the first core this process may run on
        break;
      }
    if (how == How::poll_on_a_busy_core)
      for (int i = 0; i < kHogs; ++i)
        hogs_.emplace_back([this] {
          pthread_setaffinity_np(pthread_self(), sizeof one_, &one_);
          while (!hog_stop_.load(std::memory_order_relaxed)) {
          }
        });
    start_stream();
  }
  ~Stuck() override {
    release();
    stop_stream();
  }
  Backend backend() const override { return Backend::mpi; }
  std::string library_version() const override { return "none"; }
  using CpuStreamCommunicator::sleeping_waiters;
  using CpuStreamCommunicator::waiter_wakeups;

  // The hogs stop here, not on the starved thread: that one would hardly run to stop it.
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    hog_stop_.store(true);
    for (std::thread& h : hogs_) h.join();
    hogs_.clear();
  }

 protected:
  Status call(Coll, Group, const void*, void*, uint64_t, DType) override {
    if (how_ == How::block) {
      std::unique_lock<std::mutex> lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
      return Status::ok();
    }
    pthread_setaffinity_np(pthread_self(), sizeof one_, &one_);
    for (;;) {
      std::lock_guard<std::mutex> lock(mu_);
      if (released_) return Status::ok();
    }
  }
  Status barrier_call() override { return Status::ok(); }

 public:
  // Until the blocking call has begun: a thread on a loaded machine may take a while to reach
  // it, and until then it is ready to run rather than blocked.
  bool entered_call() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(120), [&] { return entered_; });
  }

 private:
  const How how_;
  cpu_set_t one_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false, entered_ = false;
  std::atomic<bool> hog_stop_{false};
  std::vector<std::thread> hogs_;
};

TEST(CpuStream, ABatchWaitedForAtItsEndWakesItsWaiterOnce) {
  // Eight collectives queued, then one wait for them all: the first blocks until the waiter is
  // asleep and release() lets it end, so all eight complete while it sleeps. Its wake-up costs more than a
  // small collective, so it is woken once, by the last, not by each (as it was before).
  Stuck comm(Stuck::How::block, 60.0);
  ASSERT_TRUE(comm.set_progress(Progress::thread).is_ok());
  float x = 1, y = 0;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(comm.all_reduce(&x, &y, 1, DType::f32).is_ok());
  std::thread opener([&] {
    while (comm.sleeping_waiters() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    comm.release();
  });
  EXPECT_TRUE(comm.synchronize().is_ok());
  opener.join();
  EXPECT_EQ(comm.waiter_wakeups(), 1u);
}

std::string timeout_line(Stuck::How how) {
  Stuck comm(how);
  float x = 1, y = 0;
  EXPECT_TRUE(comm.set_progress(Progress::thread).is_ok());
  EXPECT_TRUE(comm.all_reduce(&x, &y, 1, DType::f32).is_ok());  // queued; runs on zb-comm
  if (how == Stuck::How::block) {
    EXPECT_TRUE(comm.entered_call());
  }
  Status s = comm.synchronize();
  comm.release();
  EXPECT_FALSE(s.is_ok());
  return s.message();
}

TEST(CpuStreamTimeout, AStarvedCommunicationThreadIsNamedNotASkippedRank) {
  const std::string line = timeout_line(Stuck::How::poll_on_a_busy_core);
  EXPECT_NE(line.find("timeout: rank 0: all_reduce of 4 bytes (fp32) did not complete within 0.3 s"),
            std::string::npos) << line;
  EXPECT_NE(line.find("rank 0's communication thread was ready to run"), std::string::npos) << line;
  EXPECT_NE(line.find("raise --timeout"), std::string::npos) << line;
  EXPECT_EQ(line.find("skipped"), std::string::npos) << line;
}

TEST(CpuStreamTimeout, AThreadBlockedForAPeerBlamesTheRankThatNeverCame) {
  const std::string line = timeout_line(Stuck::How::block);
  EXPECT_NE(line.find("timeout: rank 0: all_reduce of 4 bytes (fp32) did not complete within 0.3 s "
                      "(a rank skipped or never reached this collective)"),
            std::string::npos) << line;
  EXPECT_EQ(line.find("ready to run"), std::string::npos) << line;
}

}  // namespace
}  // namespace zb
