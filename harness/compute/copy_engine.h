// Copy engine: copies between device and pinned host memory, and the host work that consumes
// them, queued in order on an engine of their own so compute goes on meanwhile. On a GPU a
// worker thread issues each copy on a dedicated CUDA stream (cudaMemcpyAsync from or to pinned
// memory); on CPU ranks "device" and "host" are both host memory and the same thread stands in
// for the copy engine. Every job is timed where it runs, so bandwidths and traces come from it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/core/device.h"
#include "harness/core/status.h"
#include "harness/core/trace.h"

namespace zb {

enum class CopyDir { d2h, h2d };

// What the engine did since the last take_stats(): bytes and busy seconds per direction, and
// the host jobs' seconds (e.g. accumulating a copied block into a shard).
struct CopyStats {
  double d2h_bytes = 0, d2h_s = 0, h2d_bytes = 0, h2d_s = 0, host_s = 0;
  int copies = 0;
};

class CopyEngine {
 public:
  // `kind`: where "device" buffers live (MemKind::device uses a CUDA stream).
  static Status create(MemKind kind, std::unique_ptr<CopyEngine>* out);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Each call queues one job and returns its ticket; jobs run one at a time in queue order.
  // `name` and `args` (JSON members) label its span when tracing is on.
  using Ticket = uint64_t;
  Ticket copy(void* dst, const void* src, size_t bytes, CopyDir dir, std::string name = "copy",
              std::string args = "");
  // Host work on the engine's thread (counted as host seconds).
  Ticket host(std::function<Status()> work, std::string name = "host", std::string args = "");
  // A wait on the engine's thread before the next job (e.g. for a collective's event), not
  // counted as copy time: the engine stands idle while it waits.
  Ticket wait_for(std::function<Status()> wait);
  // Copies queued from now on start once the compute queued on `compute_stream` so far has
  // finished (a CUDA event between the streams; nothing to order on CPU, where compute has
  // finished when its call returns).
  Status after_compute(void* compute_stream);
  // GPU only: copies queued from now on start once what `order(relay)` makes `relay` wait for
  // is done. `relay` is a CUDA stream of the engine that runs nothing else, handed to the
  // caller's thread now, e.g. to a communicator's compute_waits_for(event, relay), so the
  // engine waits on the device for a collective without calling into the communicator from
  // its own thread. On CPU, use wait_for.
  Status after_stream(const std::function<Status(void* relay)>& order);

  // The host waits until job `ticket` has run; any job's error comes back here.
  Status wait(Ticket ticket);
  Status synchronize() { return wait(issued_); }
  Ticket last_ticket() const { return issued_; }

  CopyStats take_stats();
  void set_trace(bool on);
  std::vector<TraceSpan> take_spans();

 private:
  explicit CopyEngine(MemKind kind) : kind_(kind) {}
  struct Job {
    enum class Kind { copy, host, wait } kind;
    void* dst;
    const void* src;
    size_t bytes;
    CopyDir dir;
    std::function<Status()> work;
    std::string name, args;
  };
  Ticket push(Job job);
  void loop();
  Status run_copy(const Job& job);

  MemKind kind_;
  void* stream_ = nullptr;  // cudaStream_t on GPU
  void* relay_ = nullptr;   // cudaStream_t: only ever waits, for after_stream
  int device_ = 0;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job> queue_;
  Ticket issued_ = 0, done_ = 0;
  bool stop_ = false, tracing_ = false;
  Status error_;
  CopyStats stats_;
  std::vector<TraceSpan> spans_;
};

}  // namespace zb
