// Schedule log: a step as the host issues it, in program order: compute, collectives issued,
// and waits of compute for them. Recorded instead of run, so a model can replay it (zb_predict).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/comm/traffic.h"

namespace zb {

struct ScheduleOp {
  enum class Kind {
    compute,  // the compute engine runs `what` (a layer's forward or backward, an update, or
              // "idle": a slot of the pipeline schedule that lasts `seconds`)
    issue,    // collective number `seq` (`coll`) is issued: it may start once compute so far is done
    wait,     // compute waits until every collective up to number `seq` is complete
    step,     // a training step begins
  } kind;
  std::string what;  // compute: "forward", "backward", "update", "idle", or a quantization kernel
                     // ("quantize", "dequantize", "reduce", "amax")
  int layer = -1;    // compute: the layer (forward, backward) or unit (update)
  uint64_t seq = 0;
  CollRecord coll{Coll::all_reduce, 0, DType::bf16};
  double seconds = 0;  // idle: how long
  // A kernel the step runs besides --compute: the elements it reads and its format.
  // - A quantization kernel (quantize, dequantize and amax: the values; reduce: every input
  //   summed), in quant_format_name's format ("int8", "int4", "fp8").
  // - backward: the layer's synthetic gradient, in the gradient's dtype ("bf16", "fp32").
  // - update: the unit's owned parameters, in the optimizer's name ("adam", "momentum").
  double elements = 0;
  std::string format{};

  bool quantization_kernel() const {
    return kind == Kind::compute && (what == "quantize" || what == "dequantize" || what == "reduce" || what == "amax");
  }
};

class ScheduleLog {
 public:
  void compute(const std::string& what, int layer) { ops_.push_back({ScheduleOp::Kind::compute, what, layer}); }
  // Compute that runs a kernel over `elements` of `format` (see ScheduleOp::elements).
  void kernel(const std::string& what, int unit, const std::string& format, double elements) {
    ScheduleOp op{ScheduleOp::Kind::compute, what, unit};
    op.format = format;
    op.elements = elements;
    ops_.push_back(op);
  }
  void issue(uint64_t seq, const CollRecord& coll) {
    ops_.push_back({ScheduleOp::Kind::issue, "", -1, seq, coll});
  }
  void wait(uint64_t seq) { ops_.push_back({ScheduleOp::Kind::wait, "", -1, seq}); }
  void idle(double seconds) {
    ops_.push_back({ScheduleOp::Kind::compute, "idle", -1, 0, CollRecord{Coll::all_reduce, 0, DType::bf16}, seconds});
  }
  void step() { ops_.push_back({ScheduleOp::Kind::step, "", -1}); }
  const std::vector<ScheduleOp>& ops() const { return ops_; }
  void clear() { ops_.clear(); }
  // Drops what was logged after the first `count` ops.
  void truncate(size_t count) {
    if (count < ops_.size()) ops_.erase(ops_.begin() + ptrdiff_t(count), ops_.end());
  }

 private:
  std::vector<ScheduleOp> ops_;
};

}  // namespace zb
