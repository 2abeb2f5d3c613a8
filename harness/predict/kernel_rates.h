// The quantization kernels' speed, as zb_optimizer --parts=quantize measured it, to price the
// kernels a quantized step runs on its compute engine (the ops the recorder logs with their
// element counts: schedule_log.h).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "harness/comm/schedule_log.h"
#include "harness/core/status.h"

namespace zb {

class KernelRates {
 public:
  // zb_optimizer results holding its quantize part. Each kernel and format's rate is its
  // params_per_s at the largest size timed (BF16 values where timed, else any dtype); the
  // reduction's counts every input element (params_per_s x inputs).
  static Status load(const std::string& path, KernelRates* out);

  // A logged kernel op's seconds: its elements at its kernel and format's rate. The step's
  // amax pass is priced at FP8 quantize's rate, which times an amax and a quantization
  // together: an upper bound. Sets `missing` (once) where the file has no such kernel.
  double seconds(const ScheduleOp& op, Status* missing) const;

  bool empty() const { return rates_.empty(); }
  const std::string& file() const { return file_; }

  // For tests: a rate set by hand (kernel as zb_optimizer names it: quantize, dequantize,
  // reduce_requantize).
  void set(const std::string& kernel, const std::string& format, double elements_per_s) {
    rates_[{kernel, format}] = elements_per_s;
  }

 private:
  std::map<std::pair<std::string, std::string>, double> rates_;  // (kernel, format) -> elements/s
  std::string file_;
};

}  // namespace zb
