// zb_optimizer: the update kernels against the memory-bandwidth limit measured in the same run,
// and the optimizer step (reduce, update, gather) of each ZeRO stage, checked bit for bit.
#include <algorithm>
#include <cstdio>

#include "bench/optimizer_kernels.h"
#include "bench/optimizer_step.h"
#include "bench/quantize_kernels.h"
#include "harness/driver/driver.h"
#include "harness/driver/sweep.h"
#include "harness/driver/table.h"
#include "harness/predict/kernel_rates.h"
#include "kernels/bandwidth.h"

namespace {

struct Options {
  std::vector<std::string> parts{"kernels", "step"};
  std::vector<zb::Optimizer> kernels{zb::Optimizer::adam, zb::Optimizer::momentum};
  std::vector<zb::DType> grads{zb::DType::bf16, zb::DType::f32};
  std::vector<zb::Stage> stages = zb::all_stages();
  uint64_t min_params = 1ull << 20, max_params = 0, step_params = 16ull << 20;
  double step_factor = 4;
  int64_t buckets = 1;
  bool check = true;
};

struct KernelRow {
  std::string kernel, grad;
  uint64_t params;
  zb::KernelResult r;
};

struct StepRow {
  std::string stage, optimizer, grad;
  uint64_t params;
  zb::StepResult r;
};

bool wanted(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

void print_tables(const std::vector<KernelRow>& kernels, const std::vector<StepRow>& steps,
                  const char* impl) {
  if (!kernels.empty()) {
    zb::Table t({"kernel", "grad", "impl", "params", "time(ms)", "Gparams/s", "GB/s", "limit GB/s",
                 "limit by", "fraction"});
    for (const auto& k : kernels)
      t.add_row({k.kernel, k.grad, impl, std::to_string(k.params), zb::fmt(k.r.kernel_s * 1e3, 3),
                 zb::fmt(k.r.params_per_s / 1e9, 3), zb::fmt(k.r.gbps, 2), zb::fmt(k.r.limit_gbps, 2),
                 k.r.limit_pattern, zb::fmt(k.r.frac, 3)});
    t.print(stdout);
    std::printf("# GB/s by the kernel's byte model (Adam 28/30, momentum 20/22, synthetic_grad 4/6 bytes per "
                "parameter with "
                "BF16/FP32 gradients); limit: the fastest bandwidth probe (copy, copy_plain, triad, rmw) "
                "over arrays of the same total size\n");
  }
  if (!steps.empty()) {
    zb::Table t({"stage", "optimizer", "grad", "params", "reduce(ms)", "update(ms)", "gather(ms)",
                 "step(ms)", "wrong"});
    for (const auto& s : steps)
      t.add_row({s.stage, s.optimizer, s.grad, std::to_string(s.params), zb::fmt(s.r.reduce_s * 1e3, 3),
                 zb::fmt(s.r.update_s * 1e3, 3), zb::fmt(s.r.gather_s * 1e3, 3),
                 zb::fmt(s.r.step_s * 1e3, 3), zb::fmt(s.r.wrong, 0)});
    t.print(stdout);
    std::printf("# each part: median over steps of the slowest rank; step = reduce + update + gather\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_optimizer",
                    "Optimizer update kernels against the copy bandwidth of the same memory, and the "
                    "optimizer step of each ZeRO stage (reduce, update, gather), checked bit for bit.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  f.add_list("parts", &opt.parts, "kernels: update kernels and the synthetic gradient against the copy limit; step: the optimizer "
             "step per stage; quantize: the quantization kernels (INT8, INT4, FP8, qgZ's reduction) "
             "against the same limit, over --grad-dtype", {"kernels", "step", "quantize"});
  f.add_list("kernels", &opt.kernels, "optimizers, in the kernel benchmarks and in the step",
             zb::optimizer_choices());
  f.add_list("grad-dtype", &opt.grads, "gradient dtypes", zb::dtype_choices());
  const uint64_t most = uint64_t(1) << 40;
  f.add_count("min-params", &opt.min_params, "smallest kernel size in parameters", 1, most);
  f.add_count("max-params", &opt.max_params,
              "largest kernel size; 0: 2^26 parameters on CPU, 2^28 on GPU", 0, most);
  f.add_double("step-factor", &opt.step_factor, "kernel size multiplier between steps", 1.0, 1024);
  f.add_list("stages", &opt.stages, "stages of the optimizer step", zb::stage_choices());
  f.add_count("step-params", &opt.step_params, "parameters of the optimizer step", 1, most);
  f.add_int("buckets", &opt.buckets, "equal buckets the step reduces and gathers one collective each",
            1, 1 << 20);
  f.add_bool("check", &opt.check, "compare the step's final state with a single-process reference");
  driver.use_reference_collective();  // zb_predict prices the steps' kernels with these rates
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;
  // The default sizes are the device's: its memory, not the host's.
  if (opt.max_params == 0) opt.max_params = driver.backend() == zb::Backend::nccl ? 256ull << 20 : 64ull << 20;
  if (opt.min_params > opt.max_params)
    return driver.bad_flag(zb::Status::error("--min-params (" + std::to_string(opt.min_params) +
                                             ") is larger than --max-params (" +
                                             std::to_string(opt.max_params) + ")"));
  if (uint64_t(opt.buckets) > opt.step_params)
    return driver.bad_flag(zb::Status::error("--buckets (" + std::to_string(opt.buckets) +
                                             ") exceeds --step-params (" + std::to_string(opt.step_params) +
                                             "): a bucket needs at least one parameter"));
  code = driver.start();
  if (code >= 0) return code;

  zb::Communicator& comm = driver.comm();
  std::unique_ptr<zb::Compute> compute;
  zb::Status s = zb::Compute::create(comm.mem_kind(), driver.cpu_threads_per_rank(), &compute);
  // Nothing here overlaps a collective with compute: each runs on the caller, like a bare call.
  if (s) s = comm.set_progress(zb::Progress::caller);
  if (!s) driver.abort_job(s);
  const char* impl = compute->kind() == zb::MemKind::device ? "cuda" : "cpu";  // which kernels run

  std::vector<KernelRow> kernel_rows;
  std::vector<StepRow> step_rows;
  // AdamW as commonly configured, so decoupled weight decay is part of what is measured.
  auto config_for = [](zb::Optimizer kind) {
    zb::OptimizerConfig config;
    config.kind = kind;
    config.adam.weight_decay = 0.01f;
    return config;
  };
  if (wanted(opt.parts, "kernels"))
    for (zb::Optimizer kind : opt.kernels)
      for (zb::DType grad : opt.grads)
        for (uint64_t p : zb::size_sweep(opt.min_params, opt.max_params, opt.step_factor)) {
          std::string kernel = zb::optimizer_name(kind), gname = zb::dtype_name(grad);
          driver.add(kernel + "/params:" + std::to_string(p) + "/grad:" + gname + "/impl:" + impl,
                     [&, p, kind, grad, kernel, gname](zb::Run& run) -> zb::Status {
                       zb::KernelResult r;
                       ZB_RETURN_IF_ERROR(zb::kernel_benchmark(run, *compute, config_for(kind), grad, p, &r));
                       kernel_rows.push_back({kernel, gname, p, r});
                       return zb::Status::ok();
                     });
        }
  // The synthetic backward's gradient, which zb_predict --kernels prices zb_zero's backward with.
  if (wanted(opt.parts, "kernels"))
    for (zb::DType grad : opt.grads)
      for (uint64_t p : zb::size_sweep(opt.min_params, opt.max_params, opt.step_factor)) {
        std::string gname = zb::dtype_name(grad);
        driver.add(std::string(zb::kSyntheticGradKernel) + "/params:" + std::to_string(p) + "/grad:" + gname +
                       "/impl:" + impl,
                   [&, p, grad, gname](zb::Run& run) -> zb::Status {
                     zb::KernelResult r;
                     ZB_RETURN_IF_ERROR(zb::synthetic_grad_benchmark(run, *compute, grad, p, &r));
                     kernel_rows.push_back({zb::kSyntheticGradKernel, gname, p, r});
                     return zb::Status::ok();
                   });
      }
  std::vector<zb::QuantRow> quant_rows;
  if (wanted(opt.parts, "quantize"))
    zb::add_quant_benchmarks(driver, *compute, zb::size_sweep(opt.min_params, opt.max_params, opt.step_factor),
                             opt.grads, impl, &quant_rows);
  if (wanted(opt.parts, "step"))
    for (zb::Optimizer kind : opt.kernels)
      for (zb::DType grad : opt.grads)
        for (zb::Stage stage : opt.stages) {
          zb::StepSetup setup;
          setup.stage = stage;
          setup.optimizer = config_for(kind);
          setup.grad_dtype = grad;
          setup.params = opt.step_params;
          setup.buckets = int(opt.buckets);
          setup.check = opt.check;
          setup.corrupt = driver.faults().corrupt_rank == comm.rank();
          std::string name = std::string("opt_step/stage:") + zb::stage_name(stage) + "/params:" +
                             std::to_string(opt.step_params) + "/optimizer:" + zb::optimizer_name(kind) +
                             "/grad:" + zb::dtype_name(grad);
          driver.add(name, [&, setup, name](zb::Run& run) -> zb::Status {
            zb::StepResult r;
            ZB_RETURN_IF_ERROR(zb::run_step_benchmark(run, *compute, setup, &r));
            if (r.wrong > 0)
              driver.mark_failed(name + ": " + zb::fmt(r.wrong, 0) + " elements differ from the reference");
            step_rows.push_back({zb::stage_name(setup.stage), zb::optimizer_name(setup.optimizer.kind),
                                 zb::dtype_name(setup.grad_dtype), setup.params, r});
            return zb::Status::ok();
          });
        }

  code = driver.run();
  if (driver.root()) zb::print_quant_table(quant_rows, impl);
  if (driver.root() && (!kernel_rows.empty() || !step_rows.empty())) {
    std::printf("\n# zb_optimizer: %d ranks, backend %s, %s kernels, %d CPU threads per rank\n", comm.size(),
                zb::backend_name(comm.backend()), impl, driver.cpu_threads_per_rank());
    print_tables(kernel_rows, step_rows, impl);
    double wrong = 0;
    for (const auto& row : step_rows) wrong += row.r.wrong;
    if (!step_rows.empty())
      std::printf("# Wrong elements       : %s\n", wrong == 0 ? "0 OK" : (zb::fmt(wrong, 0) + " FAILED").c_str());
  }
  return code;
}
