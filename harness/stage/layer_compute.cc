// Layer compute: sleep, spin or GEMM per layer, on the rank's compute engine.
#include "harness/stage/layer_compute.h"

#include <sys/prctl.h>

#include <errno.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "harness/core/clock.h"
#include "harness/core/parse.h"
#include "kernels/gemm.h"
#include "kernels/spin.h"

#ifdef ZB_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace zb {

Status parse_compute_spec(const std::string& text, ComputeSpec* out) {
  ComputeSpec s;
  s.text = text;
  const std::string allowed = "; use none, sleep:US, sleep-for:US, spin:US or gemm:TOKENS";
  if (text == "none") {
    *out = s;
    return Status::ok();
  }
  size_t colon = text.find(':');
  std::string kind = text.substr(0, colon), arg = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "sleep" || kind == "sleep-for" || kind == "spin") {
    double us = 0;
    if (!parse_double(arg, &us) || us < 0 || us > 1e8)
      return Status::error("--compute=" + text + ": microseconds must be a number in [0, 1e8]" + allowed);
    s.kind = kind == "spin" ? ComputeSpec::Kind::spin : ComputeSpec::Kind::sleep;
    s.keep_schedule = kind != "sleep-for";
    s.seconds = us * 1e-6;
  } else if (kind == "gemm") {
    int64_t t = 0;
    if (!parse_int(arg, &t) || t < 1 || t > (1 << 24))
      return Status::error("--compute=" + text + ": tokens must be an integer in [1, 16777216]" + allowed);
    s.kind = ComputeSpec::Kind::gemm;
    s.tokens = t;
  } else {
    return Status::error("--compute='" + text + "' is not known" + allowed);
  }
  *out = s;
  return Status::ok();
}

Status LayerCompute::create(const ComputeSpec& spec, const ModelSpec& model, Compute& compute,
                            int cpu_threads, std::unique_ptr<LayerCompute>* out) {
  auto lc = std::unique_ptr<LayerCompute>(new LayerCompute(spec, model, compute, cpu_threads));
  if (spec.kind == ComputeSpec::Kind::gemm) {
    uint64_t k = 1, n = 1, w = 1;
    for (const auto& l : model.layers)
      for (const auto& [in, outd] : l.matrices) k = std::max(k, in), n = std::max(n, outd), w = std::max(w, in * outd);
    uint64_t t = uint64_t(spec.tokens);
    ZB_RETURN_IF_ERROR(Buffer::allocate(compute.kind(), t * k * 2, &lc->a_));
    ZB_RETURN_IF_ERROR(Buffer::allocate(compute.kind(), w * 2, &lc->b_));
    ZB_RETURN_IF_ERROR(Buffer::allocate(compute.kind(), t * n * 4, &lc->c_));
    ZB_RETURN_IF_ERROR(compute.zero(lc->a_.data(), lc->a_.bytes()));
    ZB_RETURN_IF_ERROR(compute.zero(lc->b_.data(), lc->b_.bytes()));
#ifdef ZB_HAVE_CUDA
    if (compute.kind() == MemKind::device) {
      cublasHandle_t h;
      if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return Status::error("cublasCreate failed");
      cublasSetStream(h, static_cast<cudaStream_t>(compute.stream()));
      lc->cublas_ = h;
    }
#endif
  }
  *out = std::move(lc);
  return Status::ok();
}

LayerCompute::~LayerCompute() {
#ifdef ZB_HAVE_CUDA
  if (cublas_) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
#endif
}

Status LayerCompute::forward(int layer) { return run(layer, 1); }
// Backward is the data gradient and the weight gradient: twice the forward's work.
Status LayerCompute::backward(int layer) { return run(layer, 2); }

void LayerCompute::sleep(double seconds) {
  // Linux lets a sleep overrun by its 50 us timer slack; across ~100 layer sleeps a
  // step that is noise as large as the communication being measured.
  static thread_local bool precise = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  (void)precise;
  if (!spec_.keep_schedule) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return;
  }
  // Even at 1 ns of slack a wake-up comes some tens of microseconds late, by a different
  // amount on each rank: over the ~50 sleeps of a step the ranks drift apart by a share of a
  // millisecond, and the early rank waits for the late one in every collective. Keeping to
  // the schedule, the lateness is paid back by the next sleep, so it never accumulates.
  const double start = now_seconds();
  if (overrun_s_ >= seconds) {  // this whole sleep is owed already
    overrun_s_ -= seconds;
    return;
  }
  const double deadline = start + seconds - overrun_s_;
  timespec at;
  at.tv_sec = time_t(std::floor(deadline));
  at.tv_nsec = long((deadline - std::floor(deadline)) * 1e9);
  // The steady clock is CLOCK_MONOTONIC (harness/core/clock.h), so the deadline is on it.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
  overrun_s_ = std::max(0.0, now_seconds() - deadline);
}

Status LayerCompute::run(int layer, int repeats) {
  switch (spec_.kind) {
    case ComputeSpec::Kind::none: return Status::ok();
    case ComputeSpec::Kind::sleep:
      sleep(spec_.seconds * repeats);
      return Status::ok();
    case ComputeSpec::Kind::spin:
#ifdef ZB_HAVE_CUDA
      if (compute_.kind() == MemKind::device)
        return spin_cuda(spec_.seconds * repeats, static_cast<cudaStream_t>(compute_.stream()));
#endif
      spin_cpu(spec_.seconds * repeats);
      return Status::ok();
    case ComputeSpec::Kind::gemm: break;
  }
  int t = int(spec_.tokens);
  for (int r = 0; r < repeats; ++r)
    for (const auto& [in, outd] : model_.layers[size_t(layer)].matrices) {
#ifdef ZB_HAVE_CUDA
      if (compute_.kind() == MemKind::device) {
        ZB_RETURN_IF_ERROR(gemm_cuda_bf16(static_cast<cublasHandle_t>(cublas_), a_.as<Bf16>(),
                                          b_.as<Bf16>(), c_.data(), DType::f32, t, int(outd),
                                          int(in), static_cast<cudaStream_t>(compute_.stream())));
        continue;
      }
#endif
      gemm_cpu_bf16(a_.as<Bf16>(), b_.as<Bf16>(), c_.data(), DType::f32, t, int(outd), int(in), threads_);
    }
  return Status::ok();
}

}  // namespace zb
