// Copy engine: one worker thread runs the queued jobs in order; on a GPU it issues each copy on
// the engine's own stream and waits for it there, so the compute stream never waits for it.
#include "harness/compute/copy_engine.h"

#include <pthread.h>

#include <chrono>
#include <cstring>

#include "harness/core/clock.h"

#ifdef ZB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace zb {

// A wait longer than this is a lost copy or collective, reported rather than hung on.
constexpr double kWaitTimeoutS = 300;

Status CopyEngine::create(MemKind kind, std::unique_ptr<CopyEngine>* out) {
  auto e = std::unique_ptr<CopyEngine>(new CopyEngine(kind));
  if (kind == MemKind::device) {
#ifdef ZB_HAVE_CUDA
    ZB_CUDA_CHECK(cudaGetDevice(&e->device_));
    cudaStream_t s;
    ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    e->stream_ = s;
    ZB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    e->relay_ = s;
#else
    return Status::error("a GPU copy engine needs a CUDA build");
#endif
  }
  e->worker_ = std::thread([p = e.get()] { p->loop(); });
  *out = std::move(e);
  return Status::ok();
}

CopyEngine::~CopyEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
#ifdef ZB_HAVE_CUDA
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  if (relay_) cudaStreamDestroy(static_cast<cudaStream_t>(relay_));
#endif
}

CopyEngine::Ticket CopyEngine::push(Job job) {
  Ticket t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    t = ++issued_;
  }
  work_cv_.notify_one();
  return t;
}

CopyEngine::Ticket CopyEngine::copy(void* dst, const void* src, size_t bytes, CopyDir dir, std::string name,
                                    std::string args) {
  return push({Job::Kind::copy, dst, src, bytes, dir, nullptr, std::move(name), std::move(args)});
}

CopyEngine::Ticket CopyEngine::host(std::function<Status()> work, std::string name, std::string args) {
  return push({Job::Kind::host, nullptr, nullptr, 0, CopyDir::d2h, std::move(work), std::move(name), std::move(args)});
}

CopyEngine::Ticket CopyEngine::wait_for(std::function<Status()> wait) {
  return push({Job::Kind::wait, nullptr, nullptr, 0, CopyDir::d2h, std::move(wait), "", ""});
}

Status CopyEngine::after_compute(void* compute_stream) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    cudaEvent_t ev;
    ZB_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ZB_CUDA_CHECK(cudaEventRecord(ev, static_cast<cudaStream_t>(compute_stream)));
    wait_for([this, ev]() -> Status {
      ZB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), ev, 0));
      ZB_CUDA_CHECK(cudaEventDestroy(ev));  // released once the wait it orders has happened
      return Status::ok();
    });
  }
#endif
  (void)compute_stream;
  return Status::ok();
}

Status CopyEngine::after_stream(const std::function<Status(void*)>& order) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    ZB_RETURN_IF_ERROR(order(relay_));
    cudaEvent_t ev;
    ZB_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ZB_CUDA_CHECK(cudaEventRecord(ev, static_cast<cudaStream_t>(relay_)));
    wait_for([this, ev]() -> Status {
      ZB_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream_), ev, 0));
      ZB_CUDA_CHECK(cudaEventDestroy(ev));
      return Status::ok();
    });
    return Status::ok();
  }
#endif
  (void)order;
  return Status::error("CopyEngine::after_stream needs a GPU engine; on CPU use wait_for");
}

Status CopyEngine::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitTimeoutS);
  if (!done_cv_.wait_until(lock, deadline, [&] { return done_ >= ticket || !error_; }))
    return Status::error("timeout: copy job " + std::to_string(ticket) + " did not complete within " +
                         std::to_string(int(kWaitTimeoutS)) + " s");
  return error_;
}

CopyStats CopyEngine::take_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  CopyStats s = stats_;
  stats_ = CopyStats();
  return s;
}

void CopyEngine::set_trace(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  tracing_ = on;
}

std::vector<TraceSpan> CopyEngine::take_spans() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceSpan> out;
  out.swap(spans_);
  return out;
}

Status CopyEngine::run_copy(const Job& job) {
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) {
    auto s = static_cast<cudaStream_t>(stream_);
    ZB_CUDA_CHECK(cudaMemcpyAsync(job.dst, job.src, job.bytes, cudaMemcpyDefault, s));
    ZB_CUDA_CHECK(cudaStreamSynchronize(s));
    return Status::ok();
  }
#endif
  std::memcpy(job.dst, job.src, job.bytes);
  return Status::ok();
}

void CopyEngine::loop() {
  pthread_setname_np(pthread_self(), "zb-copy");
#ifdef ZB_HAVE_CUDA
  if (kind_ == MemKind::device) cudaSetDevice(device_);
#endif
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const double t0 = now_seconds();
    Status s = job.kind == Job::Kind::copy ? run_copy(job) : job.work();
    const double t1 = now_seconds();
    {
      // The span and the counts are in place before the job shows as done, so whoever waited
      // for it finds them, and its own next span starts after this one ends.
      std::lock_guard<std::mutex> lock(mu_);
      if (job.kind == Job::Kind::copy) {
        (job.dir == CopyDir::d2h ? stats_.d2h_bytes : stats_.h2d_bytes) += double(job.bytes);
        (job.dir == CopyDir::d2h ? stats_.d2h_s : stats_.h2d_s) += t1 - t0;
        ++stats_.copies;
      } else if (job.kind == Job::Kind::host) {
        stats_.host_s += t1 - t0;
      }
      if (tracing_ && job.kind != Job::Kind::wait) spans_.push_back({job.name, Track::copy, t0, t1, job.args});
      if (!s && error_) {
        const std::string what = job.kind != Job::Kind::copy ? (job.name.empty() ? "a wait" : job.name)
                                 : std::string(job.dir == CopyDir::d2h ? "a device-to-host" : "a host-to-device") +
                                       " copy of " + std::to_string(job.bytes) + " bytes";
        error_ = s.context("copy engine, " + what);
      }
      ++done_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace zb
