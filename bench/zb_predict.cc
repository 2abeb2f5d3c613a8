// zb_predict: each ZeRO stage's step predicted from a zb_collectives sweep: the step's own
// schedule, recorded rather than run, replayed on a compute engine and a communication stream
// whose collectives take what the sweep measured. Benchmarks carry the names of the zb_zero
// benchmarks they predict, so the two results files pair up.
#include <algorithm>
#include <cstdio>

#include "bench/bench_names.h"
#include "bench/predict_bench.h"
#include "harness/core/files.h"
#include "harness/driver/driver.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"
#include "harness/plan/pipeline_formula.h"
#include "harness/predict/results.h"

namespace {

struct Options {
  std::string sweep, compute = "none", trace, measured;
  std::vector<int64_t> microbatches;  // empty: zb_zero's steps
  int64_t ranks = 0, prefetch = 1, pp = 2, pp_rank = 0;
  bool overlap = true;
};

struct Row {
  std::string stage;
  zb::StepPrediction p;
  const std::map<std::string, double>* measured;
};

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_predict",
                    "Each stage's step predicted from a zb_collectives sweep: its collectives from "
                    "the step's own schedule, their times from the sweep, overlap from the "
                    "schedule's dependencies. Runs as one process; --ranks sets the modelled N.");
  driver.set_default_iterations(1, 0);
  driver.model_nodes_only();
  Options opt;
  auto& f = driver.flags();
  f.add_string("sweep", &opt.sweep, "zb_collectives results JSON measured at --ranks ranks (required)");
  f.add_int("ranks", &opt.ranks, "data-parallel ranks to predict for (default: the sweep's)", 0, 1 << 20);
  zb::ModelFlagSpec spec;
  spec.chunks = true;
  spec.chunks_default = 2;
  spec.stages_help = "stages to predict";
  zb::ModelFlags model_flags(f, spec);
  f.add_string("compute", &opt.compute, "per-layer compute: none, sleep:US or spin:US (forward; "
               "backward twice as long), as zb_zero takes it");
  f.add_choice("overlap", &opt.overlap, "off: every collective serialised after the compute it follows",
               zb::Choices<bool>{{"on", true}, {"off", false}});
  f.add_int("prefetch", &opt.prefetch, "z3: layers all-gathered ahead of the one computing", 0, 64);
  f.add_string("trace", &opt.trace, "write the predicted step as a Chrome trace here (PATH_<stage> for several)");
  f.add_ints("microbatches", &opt.microbatches, "predict zb_pipeline's steps instead: micro-batches per step, "
             "M or a list 1,2,4,8 (--stages then takes dp, z1, z2)", 1, 4096);
  f.add_int("pp", &opt.pp, "pipeline: pipeline ranks P", 1, 1024);
  f.add_int("pp-rank", &opt.pp_rank, "pipeline: the pipeline rank p every data-parallel rank plays", 0, 1023);
  f.add_string("measured", &opt.measured, "zb_zero results JSON of the same configuration: report each "
               "prediction's error against the measured step");
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;

  zb::ModelSetup ms;
  zb::ComputeSpec compute;
  zb::Sweep sweep;
  zb::Status s = opt.sweep.empty() ? zb::Status::error("needs --sweep=PATH, a zb_collectives results JSON")
                                   : zb::Sweep::load(opt.sweep, &sweep);
  if (s) s = model_flags.resolve(&ms);
  if (s) s = zb::parse_compute_spec(opt.compute, &compute);
  if (s && compute.kind == zb::ComputeSpec::Kind::gemm)
    s = zb::Status::error("--compute=gemm cannot be predicted (its time is the GPU's); use sleep:US or spin:US");
  const int ranks = opt.ranks ? int(opt.ranks) : sweep.ranks();
  if (s && ranks != sweep.ranks())
    s = zb::Status::error("--ranks=" + std::to_string(ranks) + " but the sweep was measured at " +
                          std::to_string(sweep.ranks()) + " ranks; sweep at the rank count you predict");
  if (s && !opt.trace.empty()) s = zb::check_output_path("--trace", opt.trace);
  for (int64_t m : opt.microbatches) {
    if (s) s = zb::check_pipeline({int(m), ms.chunks, int(opt.pp), int(opt.pp_rank)});
    for (zb::Stage st : ms.stages)
      if (s && !zb::is_pipeline_stage(st))
        s = zb::Status::error(std::string("--stages: ") + zb::stage_name(st) + " has no pipeline form; use dp, z1, z2");
  }
  zb::Results measured;
  if (s && !opt.measured.empty()) s = zb::load_results(opt.measured, "--measured", &measured);
  zb::Topology topo;
  if (s) s = zb::modelled_topology(ranks, int(driver.ranks_per_node()), &topo);
  if (!s) return driver.bad_flag(s);
  code = driver.start();
  if (code >= 0) return code;
  const zb::ModelSpec& model = ms.model;
  const zb::Optimizer optimizer = ms.step.optimizer.kind;
  const zb::DType grad_dtype = ms.step.grad_dtype;
  std::vector<int> microbatches(opt.microbatches.begin(), opt.microbatches.end());

  zb::PredictSetup base;
  base.model = &model;
  base.sweep = &sweep;
  base.compute = compute;
  base.topo = topo;
  base.config = ms.step;
  base.config.overlap = opt.overlap;
  base.config.prefetch = int(opt.prefetch);
  std::vector<Row> rows;
  const std::string overlap = opt.overlap ? "on" : "off";
  // One prediction per stage (and per M for the pipeline), named as the benchmark it predicts.
  auto add = [&](zb::PredictSetup setup, const std::string& name, const std::string& label) {
    auto found = measured.benchmarks.find(name);
    if (found != measured.benchmarks.end()) setup.measured = &found->second;
    driver.add(name, [&, setup, label](zb::Run& run) -> zb::Status {
      zb::StepPrediction p;
      ZB_RETURN_IF_ERROR(zb::run_predict_benchmark(run, setup, &p));
      rows.push_back({label, p, setup.measured});
      return zb::Status::ok();
    });
  };
  const size_t count = ms.stages.size() * std::max<size_t>(1, microbatches.size());
  for (zb::Stage st : ms.stages) {
    zb::PredictSetup setup = base;
    setup.config.stage = st;
    const std::string stage = zb::stage_name(st);
    if (microbatches.empty()) {
      setup.trace_path = zb::per_stage_path(opt.trace, stage, count);
      add(setup, zb::zero_benchmark_name(st, model, optimizer, grad_dtype, opt.compute, opt.overlap), stage);
      continue;
    }
    for (int m : microbatches) {
      setup.pipeline = true;
      setup.pipeline_config.stage = st;
      setup.pipeline_config.optimizer = setup.config.optimizer;
      setup.pipeline_config.grad_dtype = grad_dtype;
      setup.pipeline_config.bucket_elems = setup.config.bucket_elems;
      setup.pipeline_config.shape = {m, ms.chunks, int(opt.pp), int(opt.pp_rank)};
      const std::string label = stage + " M=" + std::to_string(m);
      setup.trace_path = zb::per_stage_path(opt.trace, stage + "_m" + std::to_string(m), count);
      add(setup, zb::pipeline_benchmark_name(st, model, setup.pipeline_config.shape, optimizer, grad_dtype,
                                             opt.compute),
          label);
    }
  }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    std::printf("\n# zb_predict: %d ranks, %s, Psi = %.0f, compute %s, overlap %s, sweep %s (%s)\n", ranks,
                model.description.c_str(), double(model.params()), opt.compute.c_str(), overlap.c_str(),
                opt.sweep.c_str(), sweep.description().c_str());
    zb::Table table({"stage", "collectives", "comm(ms)", "measured", "compute(ms)", "exposed(ms)", "measured",
                     "step(ms)", "extrapolated"});
    for (const auto& [stage, p, m] : rows) {
      auto at = [&](const char* key) { return m && m->count(key) ? m->at(key) * 1e3 : NAN; };
      table.add_row({stage, std::to_string(p.collectives), zb::fmt(p.comm_s * 1e3, 3), zb::fmt(at("comm_s"), 3),
                     zb::fmt(p.compute_s * 1e3, 3), zb::fmt(p.exposed_s * 1e3, 3), zb::fmt(at("exposed_comm_s"), 3),
                     zb::fmt(p.step_s * 1e3, 3), p.extrapolated ? "yes" : "no"});
    }
    table.print(stdout);
    std::printf("# comm: the step replayed with no compute, its waits and hand-offs included (zb_zero's comm_s); "
                "exposed: time compute waits for communication in the replay; the synthetic backward and the "
                "optimizer's update are not modelled\n");
  }
  return code;
}
