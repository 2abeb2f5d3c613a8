// zb_pipeline: dp, z1 (Megatron's distributed optimizer) and pipeline ZeRO-2 when gradients
// accumulate over micro-batches of a pipeline schedule with model chunks: volume (accounted,
// measured at the sockets and by formula), memory and gradient memory (measured and by
// formula), time, exposed communication and its tail, and a bit-exact check.
#include <cstdio>

#include "bench/bench_names.h"
#include "bench/pipeline_bench.h"
#include "harness/core/files.h"
#include "harness/core/parse.h"
#include "harness/driver/driver.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"
#include "harness/plan/pipeline_formula.h"

namespace {

struct Options {
  int64_t pp = 2, pp_rank = 0;
  std::string compute = "none", trace, microbatches = "4";
  bool check = true, split = true;
};

struct Row {
  std::string stage;
  int microbatches;
  zb::PipelineResult r;
};

// PATH for one benchmark; otherwise PATH with _<stage> (and _m<M> for several M) before the
// extension.
std::string trace_path(const std::string& path, const std::string& suffix) {
  if (path.empty() || suffix.empty()) return path;
  size_t dot = path.rfind('.'), slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

zb::Status parse_microbatches(const std::string& text, std::vector<int>* out) {
  for (const std::string& item : zb::split(text, ',')) {
    int64_t m = 0;
    if (!zb::parse_int(item, &m) || m < 1 || m > 4096)
      return zb::Status::error("--microbatches: '" + item + "' is not a count in [1, 4096]; give M or a list 1,2,4,8");
    out->push_back(int(m));
  }
  if (out->empty()) return zb::Status::error("--microbatches needs a value, e.g. 4 or 1,2,4,8");
  return zb::Status::ok();
}

void print_table(const std::vector<Row>& rows) {
  zb::Table table({"stage", "M", "bytes/param formula", "measured", "grad bytes/param formula", "measured",
                   "volume formula(Psi)", "accounted(Psi)", "measured(Psi)", "step(ms)", "compute(ms)",
                   "exposed(ms)", "tail(ms)", "chunk reduce(ms)", "gather(ms)", "wrong"});
  for (const auto& [stage, m, r] : rows)
    table.add_row({stage, std::to_string(m), zb::fmt(r.formula, 3), zb::fmt(r.per_param, 3),
                   zb::fmt(r.grad_formula, 3), zb::fmt(r.grad_per_param, 3), zb::fmt(r.volume_formula, 4),
                   zb::fmt(r.volume_accounted, 4), zb::fmt(r.volume_measured, 4), zb::fmt(r.step_s * 1e3, 2),
                   zb::fmt(r.compute_s * 1e3, 2), zb::fmt(r.exposed_s * 1e3, 2), zb::fmt(r.tail_s * 1e3, 2),
                   zb::fmt(r.chunk_reduce_s * 1e3, 2), zb::fmt(r.gather_s * 1e3, 2), zb::fmt(r.wrong, 0)});
  table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_pipeline",
                    "dp, z1 and pipeline ZeRO-2 under micro-batch accumulation with model chunks, in "
                    "Megatron's 1F1B order for one pipeline rank: volume, memory, gradient memory, "
                    "exposed communication, and the final state checked against a reference.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  zb::ModelFlagSpec spec;
  spec.chunks = true;
  spec.chunks_default = 2;
  spec.stage_set = zb::pipeline_stages();
  spec.params_help = "parameters of the whole model, split over --layers equal layers";
  spec.bucket_help = "gradient bucket size in MiB of gradients, within a chunk";
  spec.stages_help = "ZeRO stages to run under the pipeline";
  zb::ModelFlags model_flags(f, spec);
  f.add_string("microbatches", &opt.microbatches, "micro-batches per step, M or a list 1,2,4,8");
  f.add_int("pp", &opt.pp, "pipeline ranks P; the model is cut into pp x chunks virtual stages", 1, 1024);
  f.add_int("pp-rank", &opt.pp_rank, "the pipeline rank p every data-parallel rank plays", 0, 1023);
  f.add_bool("check", &opt.check, "compare the final state with a single-process reference");
  f.add_bool("split", &opt.split, "also time compute alone, communication alone, one chunk's reduction and "
             "the gathers (--no-split: volumes and memory only)");
  f.add_string("compute", &opt.compute, "per-layer compute: none, sleep:US, spin:US or gemm:TOKENS "
               "(forward; backward twice as long)");
  f.add_string("trace", &opt.trace, "write a Chrome trace of one step of every rank here");
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;

  zb::ModelSetup ms;
  zb::ComputeSpec compute_spec;
  std::vector<int> microbatches;
  zb::Status s = model_flags.resolve(&ms);
  if (s) s = zb::parse_compute_spec(opt.compute, &compute_spec);
  if (s) s = parse_microbatches(opt.microbatches, &microbatches);
  for (int m : microbatches) {
    // The layout's own checks (enough layers for pp x chunks) hold at any rank count.
    const zb::PipelineShape shape{m, ms.chunks, int(opt.pp), int(opt.pp_rank)};
    zb::PipelineLayout layout;
    if (s) s = zb::check_pipeline(shape);
    if (s) s = zb::make_pipeline_layout(ms.model, shape, ms.step.bucket_elems, 1, 1, &layout);
  }
  if (s && !opt.trace.empty()) s = zb::check_output_path("--trace", opt.trace);
  if (!s) return driver.bad_flag(s);
  driver.set_thread_progress(true);  // the step's collectives run on the communication thread
  code = driver.start();
  if (code >= 0) return code;

  zb::Communicator& comm = driver.comm();
  const int n = comm.size();
  const zb::ModelSpec& model = ms.model;
  const zb::Optimizer optimizer = ms.step.optimizer.kind;
  const zb::DType grad_dtype = ms.step.grad_dtype;
  std::unique_ptr<zb::Compute> compute;
  s = zb::Compute::create(comm.mem_kind(), driver.cpu_threads_per_rank(), &compute);
  if (!s) driver.abort_job(s);
  std::string why_not;
  const bool measurable = n > 1 && zb::socket_transport(zb::backend_name(comm.backend()), n, &why_not);
  comm.set_measure_wire(measurable);

  std::vector<Row> rows;
  const bool several = ms.stages.size() * microbatches.size() > 1;
  for (zb::Stage st : ms.stages)
    for (int m : microbatches) {
      zb::PipelineBenchSetup setup;
      setup.model = &model;
      setup.compute = compute_spec;
      setup.check = opt.check;
      setup.split = opt.split;
      setup.measure_wire = measurable;
      setup.config.stage = st;
      setup.config.optimizer = ms.step.optimizer;
      setup.config.grad_dtype = grad_dtype;
      setup.config.bucket_elems = ms.step.bucket_elems;
      setup.config.shape = {m, ms.chunks, int(opt.pp), int(opt.pp_rank)};
      setup.config.corrupt = driver.faults().corrupt_rank == comm.rank();
      const std::string stage = zb::stage_name(st);
      std::string suffix = several ? "_" + stage + (microbatches.size() > 1 ? "_m" + std::to_string(m) : "") : "";
      setup.trace_path = trace_path(opt.trace, suffix);
      const std::string name =
          zb::pipeline_benchmark_name(st, model, setup.config.shape, optimizer, grad_dtype, opt.compute);
      driver.add(name, [&, setup, stage, m](zb::Run& run) -> zb::Status {
        zb::PipelineResult r;
        ZB_RETURN_IF_ERROR(zb::run_pipeline_benchmark(run, *compute, setup, &r));
        if (r.wrong > 0)
          driver.mark_failed(stage + " M=" + std::to_string(m) + ": " + zb::fmt(r.wrong, 0) +
                             " final weights differ from the reference");
        rows.push_back({stage, m, r});
        return zb::Status::ok();
      });
    }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    std::printf("\n# zb_pipeline: %d ranks, %s, Psi of the whole model = %.0f, %d chunks, pp %ld, pp rank %ld, %s, "
                "%s gradients, compute %s, backend %s\n",
                n, model.description.c_str(), double(model.params()), ms.chunks, long(opt.pp),
                long(opt.pp_rank), zb::optimizer_name(optimizer), zb::dtype_name(grad_dtype),
                opt.compute.c_str(), zb::backend_name(comm.backend()));
    print_table(rows);
    std::printf("# per parameter of this pipeline stage; measured: %s growth while the state was allocated; "
                "exposed: time compute waited for communication; tail: the part after the last backward\n",
                comm.mem_kind() == zb::MemKind::device ? "cudaMemGetInfo" : "resident-set");
    if (!measurable)
      std::printf("# volume measured: n/a: %s\n", n == 1 ? "one rank moves nothing" : why_not.c_str());
  }
  return code;
}
