// The kernels' speed as zb_optimizer measured it, to price the kernels a step runs on its
// compute engine besides --compute (the ops the recorder logs with their element counts:
// schedule_log.h): the quantization kernels (--parts=quantize), the optimizer's update and the
// synthetic backward's gradient (--parts=kernels).
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "harness/comm/schedule_log.h"
#include "harness/core/status.h"

namespace zb {

// zb_optimizer's name for the synthetic backward's gradient kernel.
constexpr const char kSyntheticGradKernel[] = "synthetic_grad";

class KernelRates {
 public:
  // zb_optimizer results holding its quantize part, its kernels part, or both.
  // - A quantization kernel's rate, per format, is its params_per_s at the largest size timed
  //   (BF16 values where timed, else any dtype); the reduction's counts every input element
  //   (params_per_s x inputs).
  // - The update's (per optimizer and gradient dtype) and the synthetic gradient's (per dtype)
  //   are kept at every size timed, twice: at the time it took with the ranks drifted apart, each
  //   nearly alone on the cores (params_per_s, from kernel_s), and at the time every rank took
  //   running it at once (side_by_side_s; in older files, the first again). An op is priced at
  //   the size nearest its own.
  // - How much faster the fastest rank runs: the median over every kernel timed of its
  //   rank_spread (0 where none has one). It is the ranks' cores that differ, not the kernels,
  //   and one kernel's spread, from a few iterations on a shared machine, is noisy.
  static Status load(const std::string& path, KernelRates* out);

  // A logged quantization kernel's seconds: its elements at its kernel and format's rate. The
  // step's amax pass is priced at FP8 quantize's rate, which times an amax and a quantization
  // together: an upper bound. Sets `missing` (once) where the file has no such kernel.
  double seconds(const ScheduleOp& op, Status* missing) const;

  // A logged backward's synthetic gradient or update (schedule_log.h) at its measured rates, at
  // `grad` dtype for the update: run alone and run by every rank at once (compute_cost weighs
  // the two by how often the ranks' kernels meet). NaN both where the file times no such kernel.
  struct StepKernelTime {
    double alone_s = NAN, together_s = NAN;
  };
  StepKernelTime step_kernel_time(const ScheduleOp& op, const std::string& grad) const;

  double rank_spread() const { return rank_spread_; }
  bool empty() const { return rates_.empty() && sized_.empty(); }
  bool prices_step_kernels() const { return !sized_.empty(); }
  const std::string& file() const { return file_; }

  // For tests: a rate set by hand (kernel as zb_optimizer names it: quantize, dequantize,
  // reduce_requantize).
  void set(const std::string& kernel, const std::string& format, double elements_per_s) {
    rates_[{kernel, format}] = elements_per_s;
  }

 private:
  std::map<std::pair<std::string, std::string>, double> rates_;  // (kernel, format) -> elements/s
  // (kernel, gradient dtype) -> size timed -> elements/s alone and side by side
  struct Rates {
    double alone = 0, together = 0;
  };
  std::map<std::pair<std::string, std::string>, std::map<double, Rates>> sized_;
  double rank_spread_ = 0;
  std::string file_;
};

}  // namespace zb
