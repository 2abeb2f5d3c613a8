// zb_zero: one real training step per ZeRO stage: time, volume in Ψ (accounted and
// measured at the sockets), memory per parameter (tracked and measured), overlap of
// communication with compute, and a bit-exact check against a single-process reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench/bench_names.h"
#include "bench/zero_bench.h"
#include "harness/comm/node_traffic.h"
#include "harness/core/files.h"
#include "harness/driver/driver.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"
#include "harness/plan/state_formula.h"

namespace {

struct Options {
  int64_t prefetch = 1;
  std::string compute = "none", sweep, trace;
  bool overlap = true, check = true;
  bool trace_comm = false;  // --trace-round=comm
};

// Every node holds the same number of consecutive ranks: rank w is at place w % S of node w / S.
bool consecutive(const zb::Topology& t) {
  if (!t.uniform()) return false;
  for (int w = 0; w < t.size; ++w)
    if (t.node_of[size_t(w)] != w / t.local_size || t.local_of[size_t(w)] != w % t.local_size) return false;
  return true;
}

struct Row {
  std::string stage;
  zb::ZeroResult r;
};

void print_table(const std::vector<Row>& rows) {
  zb::Table table({"stage", "bytes/param formula", "measured", "volume accounted(Psi)", "measured(Psi)",
                   "inter(Psi)", "inter-node MB accounted", "measured", "step(ms)", "compute(ms)", "comm(ms)",
                   "exposed(ms)", "overlap", "wrong"});
  for (const auto& [stage, r] : rows)
    table.add_row({stage, zb::fmt(r.formula, 3), zb::fmt(r.per_param_measured, 3), zb::fmt(r.volume_accounted, 4),
                   zb::fmt(r.volume_measured, 4), zb::fmt(r.volume_inter, 4), zb::fmt(r.inter_accounted / 1e6, 3),
                   zb::fmt(r.inter_measured / 1e6, 3), zb::fmt(r.step_s * 1e3, 2), zb::fmt(r.compute_s * 1e3, 2),
                   zb::fmt(r.comm_s * 1e3, 2), zb::fmt(r.exposed_s * 1e3, 2), zb::fmt(r.overlap, 2),
                   zb::fmt(r.wrong, 0)});
  table.print(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_zero",
                    "One training step per ZeRO stage on real buffers: time, volume in Psi, memory "
                    "per parameter, overlap, and the final state checked against a reference.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  zb::ModelFlagSpec spec;
  spec.quantize = true;
  zb::ModelFlags model_flags(f, spec);
  f.add_bool("check", &opt.check, "compare the final state with a single-process reference");
  f.add_string("compute", &opt.compute, "per-layer compute: none, sleep:US, spin:US or gemm:TOKENS "
               "(forward; backward twice as long)");
  f.add_choice("overlap", &opt.overlap, "off serialises every collective after the compute it follows",
               zb::Choices<bool>{{"on", true}, {"off", false}});
  f.add_int("prefetch", &opt.prefetch, "z3: layers all-gathered ahead of the one computing", 0, 64);
  f.add_string("compute-sweep", &opt.sweep, "US,US,...: per-layer compute values (kind from --compute, "
               "sleep by default) for exposed communication against compute/communication");
  f.add_string("trace", &opt.trace, "write a Chrome trace of one step of every rank here");
  f.add_choice("trace-round", &opt.trace_comm, "which step --trace draws: step (compute and communication) or "
               "comm (communication alone, the round comm_s times)",
               zb::Choices<bool>{{"step", false}, {"comm", true}});
  driver.use_reference_collective();  // zb_predict holds it against the sweep's
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;

  zb::ModelSetup ms;
  zb::ComputeSpec compute_spec;
  zb::Status s = model_flags.resolve(&ms);
  if (s) s = zb::parse_compute_spec(opt.compute, &compute_spec);
  std::vector<double> sweep_us;
  for (const auto& item : opt.sweep.empty() ? std::vector<std::string>{} : zb::split(opt.sweep, ',')) {
    double us = 0;
    if (s && (!zb::parse_double(item, &us) || us < 0))
      s = zb::Status::error("--compute-sweep: '" + item + "' is not a number of microseconds >= 0");
    sweep_us.push_back(us);
  }
  if (s && !sweep_us.empty() && compute_spec.kind == zb::ComputeSpec::Kind::gemm)
    s = zb::Status::error("--compute-sweep varies sleep or spin compute; --compute=gemm cannot be swept");
  if (s && !opt.trace.empty()) s = zb::check_output_path("--trace", opt.trace);
  if (s && opt.trace_comm && opt.trace.empty()) s = zb::Status::error("--trace-round=comm: give --trace=PATH");
  if (!s) return driver.bad_flag(s);
  driver.set_thread_progress(true);  // the step's collectives run on the communication thread
  code = driver.start();
  if (code >= 0) return code;
  const zb::ModelSpec& model = ms.model;
  const zb::Optimizer optimizer = ms.step.optimizer.kind;
  const zb::DType grad_dtype = ms.step.grad_dtype;
  zb::Communicator& comm = driver.comm();
  const int n = comm.size();
  for (zb::Stage st : ms.stages) {
    const zb::StageModel& m = zb::stage_model(st);
    if ((m.reduces_across_nodes() || m.node_weight_copy) && !driver.topology().uniform())
      return driver.bad_flag(zb::Status::error(std::string("--stages=") + m.name + " needs the same number of ranks "
                                               "on every node; these nodes differ (see --ranks-per-node)"));
    // qgZ sends block o of every unit to rank o through its node's rank at place o % S.
    for (const zb::Quantization& q : ms.quantizations(st))
      if (q.grads != zb::GradQuant::none && !consecutive(driver.topology()))
        return driver.bad_flag(zb::Status::error(zb::config_label(st, q) + " needs nodes of consecutive ranks, the "
                                                 "same number on each (mpirun's default mapping by slot)"));
  }
  std::unique_ptr<zb::Compute> compute;
  s = zb::Compute::create(comm.mem_kind(), driver.cpu_threads_per_rank(), &compute);
  if (!s) driver.abort_job(s);
  std::string why_not;
  const bool measurable = n > 1 && zb::socket_transport(zb::backend_name(comm.backend()), n, &why_not);
  comm.set_measure_wire(measurable);

  zb::ZeroBenchSetup base;
  base.model = &model;
  base.compute = compute_spec;
  base.check = opt.check;
  base.measure_wire = measurable;
  base.trace_comm_only = opt.trace_comm;
  base.config = ms.step;
  base.config.overlap = opt.overlap;
  base.config.prefetch = int(opt.prefetch);
  base.config.cpu_threads = driver.cpu_threads_per_rank();
  base.config.corrupt = driver.faults().corrupt_rank == comm.rank();
  std::vector<Row> rows;

  const std::string overlap = opt.overlap ? "on" : "off";
  size_t configs = 0;
  for (zb::Stage st : ms.stages) configs += ms.quantizations(st).size();
  for (zb::Stage st : ms.stages)
    for (const zb::Quantization& q : ms.quantizations(st)) {
      zb::ZeroBenchSetup setup = base;
      setup.config.stage = st;
      setup.config.quant = q;
      setup.config.slow_fraction = driver.faults().slow_stage == int(st) ? driver.faults().slow_stage_fraction : 0;
      setup.config.late_s = driver.faults().late_rank == comm.rank() ? driver.faults().late_s : 0;
      const std::string stage = zb::config_label(st, q);
      const std::string tail = zb::model_segments(model, optimizer, grad_dtype);
      if (sweep_us.empty()) {
        setup.trace_path = zb::per_stage_path(opt.trace, zb::config_file_label(st, q), configs);
        driver.add(zb::zero_benchmark_name(st, model, optimizer, grad_dtype, opt.compute, opt.overlap, q),
                   [&, setup, stage](zb::Run& run) -> zb::Status {
                     zb::ZeroResult r;
                     ZB_RETURN_IF_ERROR(zb::run_zero_benchmark(run, *compute, setup, &r));
                     if (r.wrong > 0)
                       driver.mark_failed(stage + ": " + zb::fmt(r.wrong, 0) + " final weights " +
                                          (setup.config.quant.any() || zb::stage_model(setup.config.stage).quantized()
                                               ? "outside the quantization's bound"
                                               : "differ from the reference"));
                     rows.push_back({stage, r});
                     return zb::Status::ok();
                   });
        continue;
      }
      for (double us : sweep_us) {
        zb::ZeroBenchSetup point = setup;
        point.check = false;
        if (point.compute.kind != zb::ComputeSpec::Kind::spin) point.compute.kind = zb::ComputeSpec::Kind::sleep;
        point.compute.seconds = us * 1e-6;
        driver.add("zero_sweep/stage:" + std::string(zb::stage_name(st)) + zb::quantize_segments(st, q) +
                       "/compute_us:" + zb::fmt(us, 0) + tail,
                   [&, point, stage](zb::Run& run) -> zb::Status {
                     zb::ZeroResult r;
                     ZB_RETURN_IF_ERROR(zb::run_zero_benchmark(run, *compute, point, &r));
                     run.counter("compute_per_layer_s", point.compute.seconds);
                     rows.push_back({stage, r});
                     return zb::Status::ok();
                   });
      }
    }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    const zb::Topology& topo = driver.topology();
    std::printf("\n# zb_zero: %d ranks (%d node(s) x %d%s), %s, Psi = %.0f, %s, %s gradients, compute %s, overlap %s, backend %s\n",
                n, topo.nodes, topo.local_size, topo.declared ? ", declared" : "",
                model.description.c_str(), double(model.params()), zb::optimizer_name(optimizer),
                zb::dtype_name(grad_dtype), opt.compute.c_str(), overlap.c_str(), zb::backend_name(comm.backend()));
    print_table(rows);
    std::printf("# bytes/param measured: %s growth while the state was allocated; exposed: time compute waited for "
                "communication; overlap = (comm - exposed) / min(comm, compute)\n",
                comm.mem_kind() == zb::MemKind::device ? "cudaMemGetInfo" : "resident-set");
    if (!measurable)
      std::printf("# volume measured: n/a: %s\n", n == 1 ? "one rank moves nothing" : why_not.c_str());
    const std::string counter = zb::kInterNodeCounterEnv;
    const std::string how = topo.declared ? "n/a for declared nodes"
                            : std::getenv(counter.c_str()) ? "the node link's counter (" + counter + ")"
                            : "n/a: no launcher named a node counter (" + counter + "; see tools/cluster.sh)";
    std::printf("# inter-node MB: per step, bytes the busiest node sent to other nodes; accounted: rings over each "
                "collective's group; measured: %s\n", how.c_str());
  }
  return code;
}
