// Reading the quantization kernels' rates from zb_optimizer results.
#include "harness/predict/kernel_rates.h"

#include "harness/core/parse.h"
#include "harness/predict/results.h"

namespace zb {

Status KernelRates::load(const std::string& path, KernelRates* out) {
  Results r;
  ZB_RETURN_IF_ERROR(load_results(path, "--kernels", &r));
  struct Best {
    double params = -1, rate = 0;
    bool bf16 = false;
  };
  std::map<std::pair<std::string, std::string>, Best> best;
  for (const auto& [name, counters] : r.benchmarks) {
    std::string kernel;
    std::map<std::string, std::string> seg = name_segments(name, &kernel);
    if (kernel != "quantize" && kernel != "dequantize" && kernel != "reduce_requantize") continue;
    auto rate = counters.find("params_per_s");
    double params = 0, inputs = 1;
    if (rate == counters.end() || !(rate->second > 0) || !parse_double(seg["params"], &params)) continue;
    if (kernel == "reduce_requantize" && !parse_double(seg["inputs"], &inputs)) continue;
    const bool bf16 = seg.count("dtype") == 0 || seg["dtype"] == "bf16";
    Best& b = best[{kernel, seg["format"]}];
    // BF16 first (what the step quantizes), then the largest size.
    if (std::pair(bf16, params) > std::pair(b.bf16, b.params)) b = {params, rate->second * inputs, bf16};
  }
  if (best.empty())
    return Status::error("--kernels=" + path + ": no quantization kernel in it; run zb_optimizer --parts=quantize");
  out->rates_.clear();
  for (const auto& [key, b] : best) out->rates_[key] = b.rate;
  out->file_ = path;
  return Status::ok();
}

double KernelRates::seconds(const ScheduleOp& op, Status* missing) const {
  const std::string kernel = op.what == "reduce" ? "reduce_requantize" : op.what == "amax" ? "quantize" : op.what;
  auto it = rates_.find({kernel, op.format});
  if (it == rates_.end()) {
    if (*missing)
      *missing = Status::error("--kernels" + std::string(file_.empty() ? "" : "=" + file_) + " times no " + kernel +
                               " of " + op.format + "; run zb_optimizer --parts=quantize");
    return 0;
  }
  return op.elements / it->second;
}

}  // namespace zb
