// The persistent kernel thread pool: workers sleep on a condition variable between runs.
#include "kernels/thread_pool.h"

#include <pthread.h>

namespace zb {

namespace {
// Set on pool workers and on a thread while it is inside run(), so nested runs go inline
// instead of waiting for a pool that is busy with their own parent.
thread_local bool t_inside_pool = false;
}  // namespace

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::run(int tasks, const std::function<void(int)>& task) {
  if (tasks <= 0) return;
  if (tasks == 1 || t_inside_pool) {
    for (int i = 0; i < tasks; ++i) task(i);
    return;
  }
  std::lock_guard<std::mutex> dispatch(dispatch_);
  t_inside_pool = true;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (int(workers_.size()) < tasks - 1) {
      int index = int(workers_.size());
      workers_.emplace_back([this, index] { worker_loop(index); });
    }
    task_ = &task;
    tasks_ = tasks;
    pending_ = tasks - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  task(0);
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
  }
  t_inside_pool = false;
}

void ThreadPool::worker_loop(int index) {
  pthread_setname_np(pthread_self(), "zb-kernel");
  t_inside_pool = true;
  unsigned long long seen = 0;
  {
    // A worker created during a run must take part in that run, not wait for the next one.
    std::lock_guard<std::mutex> lock(mu_);
    seen = generation_ - 1;
  }
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index + 1 >= tasks_) continue;  // this run needs fewer workers than exist
      task = task_;
    }
    (*task)(index + 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

ThreadPool& kernel_pool() {
  // Leaked on purpose: joining workers from a static destructor after main races with other
  // static destructors (and with MPI_Finalize in the benchmarks).
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

}  // namespace zb
