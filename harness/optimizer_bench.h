// zb_optimizer's harness: the optimizer step of a ZeRO stage (reduce, update, gather) timed part
// by part and checked bit for bit, and the staggered array layout of every zb_optimizer buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/compute.h"
#include "harness/driver.h"
#include "harness/zero.h"

namespace zb {

// Bytes an update moves per parameter by the kernel's own stated model (optimizer.h):
// Adam 28 with BF16 gradients, 30 with FP32; momentum 20 and 22.
size_t update_bytes_per_param(Optimizer kind, DType grad);
// "cpu" or "cuda": which kernels run, by where the buffers live.
const char* impl_name(MemKind kind);

// Arrays carved from one allocation, array i starting (4 KiB + 256 B) x i after the previous one
// ends (rounded up to 4 KiB). Separately mapped buffers of one power-of-two size sit at addresses
// that agree in every bit below that size, and on a Zen 4 guest that alone made AdamW over 64M
// parameters 2x slower (27 against 54 GB/s): staggered, the kernel is measured, not the
// aliasing of its streams. 256 B keeps every array aligned for 16-byte and 64-byte accesses.
class StaggeredArrays {
 public:
  Status allocate(MemKind kind, const std::vector<size_t>& bytes);
  template <typename T>
  T* as(size_t i) const { return reinterpret_cast<T*>(buffer_.as<char>() + offsets_[i]); }
  MemKind kind() const { return buffer_.kind(); }

 private:
  Buffer buffer_;
  std::vector<size_t> offsets_;
};

struct StepSetup {
  Stage stage = Stage::dp;
  OptimizerConfig optimizer;
  DType grad_dtype = DType::bf16;
  uint64_t params = 0;
  int buckets = 1;        // the reduction and the gather run as this many collectives
  bool check = true;
  bool corrupt = false;   // test only: perturb one gradient element of the check's first step
};

struct StepResult {
  double reduce_s = 0, update_s = 0, gather_s = 0, step_s = 0, wrong = 0;
  uint64_t padding = 0;
};

// The reference state for one configuration, kept between benchmarks because the stages
// share it: it costs a sum over every rank's gradients for every element.
struct StepReference {
  bool valid = false;
  Optimizer kind = Optimizer::adam;
  DType grad = DType::bf16;
  uint64_t padded = 0;  // layouts with the same padded size place every unit alike
  CheckState state;
};

// Kept small so the reference stays cheap; >= 2 so a wrong gather feeds a wrong gradient.
constexpr int64_t kCheckSteps = 3;

Status run_step_benchmark(Run& run, Compute& compute, const StepSetup& setup,
                          StepReference* reference, StepResult* out);

}  // namespace zb
