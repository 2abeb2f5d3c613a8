// Reading the quantization kernels' rates from zb_optimizer results.
#include "harness/predict/kernel_rates.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/parse.h"
#include "harness/core/stats.h"
#include "harness/predict/results.h"

namespace zb {

Status KernelRates::load(const std::string& path, KernelRates* out) {
  Results r;
  ZB_RETURN_IF_ERROR(load_results(path, "--kernels", &r));
  out->sized_.clear();
  struct Best {
    double params = -1, rate = 0;
    bool bf16 = false;
  };
  std::map<std::pair<std::string, std::string>, Best> best;
  std::vector<double> spreads;
  for (const auto& [name, counters] : r.benchmarks) {
    std::string kernel;
    std::map<std::string, std::string> seg = name_segments(name, &kernel);
    auto spread = counters.find("rank_spread");
    if (spread != counters.end() && std::isfinite(spread->second))
      spreads.push_back(std::clamp(spread->second, 0.0, 1.0));
    auto rate = counters.find("params_per_s");
    if (kernel == "adam" || kernel == "momentum" || kernel == kSyntheticGradKernel) {
      // Alone (params_per_s) and at the time every rank took running it at once, as a step's
      // ranks run theirs where they meet (side_by_side_s; files from before it was reported
      // have the first only).
      double params = 0;
      if (!parse_double(seg["params"], &params) || !(params > 0)) continue;
      if (rate == counters.end() || !(rate->second > 0)) continue;
      auto together = counters.find("side_by_side_s");
      const bool both = together != counters.end() && together->second > 0;
      out->sized_[{kernel, seg["grad"]}][params] = {rate->second, both ? params / together->second : rate->second};
      continue;
    }
    if (kernel != "quantize" && kernel != "dequantize" && kernel != "reduce_requantize") continue;
    double params = 0, inputs = 1;
    if (rate == counters.end() || !(rate->second > 0) || !parse_double(seg["params"], &params)) continue;
    if (kernel == "reduce_requantize" && !parse_double(seg["inputs"], &inputs)) continue;
    const bool bf16 = seg.count("dtype") == 0 || seg["dtype"] == "bf16";
    Best& b = best[{kernel, seg["format"]}];
    // BF16 first (what the step quantizes), then the largest size.
    if (std::pair(bf16, params) > std::pair(b.bf16, b.params)) b = {params, rate->second * inputs, bf16};
  }
  if (best.empty() && out->sized_.empty())
    return Status::error("--kernels=" + path +
                         ": no kernel zb_predict prices in it; run zb_optimizer --parts=quantize,kernels");
  out->rates_.clear();
  for (const auto& [key, b] : best) out->rates_[key] = b.rate;
  out->rank_spread_ = spreads.empty() ? 0 : median(spreads);
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

KernelRates::StepKernelTime KernelRates::step_kernel_time(const ScheduleOp& op, const std::string& grad) const {
  if (op.elements <= 0) return {0, 0};
  // backward's format is the gradient dtype; update's the optimizer.
  auto it = op.what == "update" ? sized_.find({op.format, grad}) : sized_.find({kSyntheticGradKernel, op.format});
  if (it == sized_.end() || it->second.empty()) return {};
  Rates best;
  double distance = INFINITY;
  for (const auto& [params, rates] : it->second) {
    const double d = std::fabs(std::log(params / op.elements));
    if (d < distance) distance = d, best = rates;
  }
  return {op.elements / best.alone, op.elements / best.together};
}

}  // namespace zb
