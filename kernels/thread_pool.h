// A small persistent thread pool, so that kernel timings do not include creating threads.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zb {

// 0 means every hardware thread; never less than 1.
int resolve_threads(int threads);

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs task(i) for every i in [0, tasks) and returns when all have finished. Task 0 runs on
  // the calling thread, the others on workers (created on first need, then kept). One run at a
  // time: a second caller waits; a call from inside a task runs its tasks inline, in order.
  void run(int tasks, const std::function<void(int)>& task);

 private:
  void worker_loop(int index);

  std::mutex dispatch_;  // held for a whole run
  std::mutex mu_;        // guards the fields below
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;  // worker k runs task k + 1
  const std::function<void(int)>* task_ = nullptr;
  int tasks_ = 0;
  int pending_ = 0;
  unsigned long long generation_ = 0;
  bool stop_ = false;
};

// The pool every CPU kernel shares.
ThreadPool& kernel_pool();

// Splits [0, n) into at most `threads` contiguous chunks and calls body(begin, end) for each on
// the kernel pool. Boundaries are multiples of `grain` elements, so that with grain 64 no two
// threads write the same cache line of a float or BF16 array; ranges smaller than
// `min_per_thread` per thread use fewer threads because waking one costs more than it saves.
template <class Body>
void parallel_chunks(size_t n, int threads, size_t grain, size_t min_per_thread, Body&& body) {
  if (n == 0) return;
  size_t want = std::max<size_t>(1, n / std::max<size_t>(1, min_per_thread));
  size_t t = std::min<size_t>(size_t(resolve_threads(threads)), want);
  size_t chunk = (n + t - 1) / t;
  chunk = (chunk + grain - 1) / grain * grain;
  int tasks = int((n + chunk - 1) / chunk);
  if (tasks <= 1) {
    body(size_t(0), n);
    return;
  }
  kernel_pool().run(tasks, [&](int i) {
    size_t begin = size_t(i) * chunk;
    size_t end = std::min(n, begin + chunk);
    body(begin, end);
  });
}

}  // namespace zb
