// zb_zero: one real training step per ZeRO stage: time, volume in Ψ (accounted and
// measured at the sockets), memory per parameter (tracked and measured), and a bit-exact
// check of the final weights against a single-process reference.
#include <cmath>
#include <cstdio>

#include "harness/driver.h"
#include "harness/table.h"
#include "harness/zero.h"

namespace {

struct Options {
  double params = 16e6, bucket_mb = 25;
  int64_t layers = 16;
  std::string model, optimizer = "adam", grad_dtype = "bf16";
  std::vector<std::string> stages{"dp", "z1", "z2", "z3"};
  bool check = true;
};

struct Row {
  std::string stage;
  double formula, measured, tracked, volume, volume_measured, step_s, wrong;
};

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_zero",
                    "One training step per ZeRO stage on real buffers: time, volume in Psi, "
                    "memory per parameter, and the final weights checked against a reference.");
  driver.set_default_iterations(10, 2);
  Options opt;
  auto& f = driver.flags();
  f.add_double("params", &opt.params, "parameters, split over --layers equal layers", 1, 1e13);
  f.add_int("layers", &opt.layers, "layers of the uniform model", 1, 1 << 20);
  f.add_string("model", &opt.model, "gpt:layers=L,hidden=H,vocab=V (real, unequal layer sizes)");
  f.add_double("bucket-mb", &opt.bucket_mb, "gradient bucket size in MiB of gradients", 1e-6, 1 << 20);
  f.add_choice("optimizer", &opt.optimizer, "adam (12 bytes of state) or momentum (8)", {"adam", "momentum"});
  f.add_choice("grad-dtype", &opt.grad_dtype, "gradient dtype", {"bf16", "fp32"});
  f.add_list("stages", &opt.stages, "stages to run", {"dp", "z1", "z2", "z3"});
  f.add_bool("check", &opt.check, "compare the final weights with a single-process reference");
  int code = driver.init(argc, argv);
  if (code >= 0) return code;

  zb::ModelSpec model;
  zb::Status s = zb::make_model(opt.model, opt.params, opt.layers, &model);
  if (!s) {
    if (driver.root()) std::fprintf(stderr, "zb_zero: %s\n", s.message().c_str());
    return 2;
  }
  zb::Communicator& comm = driver.comm();
  const int n = comm.size();
  std::unique_ptr<zb::Compute> compute;
  s = zb::Compute::create(comm.memKind(), driver.cpu_threads_per_rank(), &compute);
  if (!s) driver.abort_job(s);
  std::string why_not;
  const bool measurable = n > 1 && zb::socket_transport(zb::backend_name(comm.backend()), n, &why_not);
  comm.setMeasureWire(measurable);

  zb::ZeroConfig base;
  zb::parse_optimizer(opt.optimizer, &base.optimizer.kind);
  zb::parse_dtype(opt.grad_dtype, &base.grad_dtype);
  const int gbytes = int(zb::dtype_size(base.grad_dtype));
  base.bucket_elems = std::max<uint64_t>(1, uint64_t(opt.bucket_mb * 1048576.0 / gbytes));
  const double psi = double(model.params());
  std::vector<Row> rows;

  for (const auto& stage_name : opt.stages) {
    zb::ZeroConfig cfg = base;
    zb::parse_stage(stage_name, &cfg.stage);
    cfg.corrupt = driver.faults().corrupt_rank == comm.rank();
    std::string name = "zero/stage:" + stage_name + "/params:" + std::to_string(model.params()) +
                       "/layers:" + std::to_string(model.layers.size()) + "/optimizer:" +
                       opt.optimizer + "/grad:" + opt.grad_dtype;
    driver.add(name, [&, cfg, stage_name](zb::Run& run) -> zb::Status {
      std::unique_ptr<zb::ZeroStep> z;
      ZB_RETURN_IF_ERROR(zb::ZeroStep::create(comm, *compute, model, cfg, &z));
      comm.traffic().clear();
      zb::Timing t;
      ZB_RETURN_IF_ERROR(run.time([&] { return z->step(); }, &t));
      const double steps = double(z->steps_done());

      double wrong = 0;
      if (opt.check) {
        std::vector<zb::Segment> segs = z->check_segments();
        zb::CheckState got, want;
        ZB_RETURN_IF_ERROR(z->state_to_host(segs, &got));
        ZB_RETURN_IF_ERROR(zb::reference_state(cfg, n, z->steps_done(), segs, *compute, &want));
        wrong = driver.sum_over_ranks(double(zb::count_mismatches(got, want)));
      }
      const zb::FlatLayout& lay = z->layout();
      double volume = comm.traffic().volume_elements() / steps / psi;
      double measured = measurable ? driver.max_over_ranks(comm.traffic().measured_volume_elements(n)) / steps / psi
                                   : NAN;
      double per_param = double(z->measured_state_bytes()) / psi;
      double tracked = double(z->tracker().resident_state_bytes()) / psi;
      double formula = zb::bytes_per_param(cfg.stage, cfg.optimizer.kind, gbytes, n);
      // The busiest rank bounds the step, so memory is reported for it.
      per_param = driver.max_over_ranks(per_param);
      run.counter("ranks", n);
      run.counter("params", psi);
      run.counter("padding", double(lay.padding()));
      run.counter("volume_psi", volume);
      run.counter("volume_psi_measured", measured);
      run.counter("bytes_per_param", per_param);
      run.counter("bytes_per_param_tracked", tracked);
      run.counter("bytes_per_param_formula", formula);
      run.counter("transient_peak_bytes", double(z->tracker().transient_peak_bytes()));
      run.counter("wire_bytes_ideal", comm.traffic().ideal_wire_bytes(n) / steps);
      run.counter("step_s", t.mean_s);
      run.counter("wrong", wrong);
      if (wrong > 0)
        driver.mark_failed(stage_name + ": " + zb::fmt(wrong, 0) + " final weights differ from the reference");
      rows.push_back({stage_name, formula, per_param, tracked, volume, measured, t.mean_s, wrong});
      return zb::Status::ok();
    });
  }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    std::printf("\n# zb_zero: %d ranks, %s, Psi = %.0f (%s), %s, %s gradients, backend %s\n", n,
                model.description.c_str(), psi, zb::fmt(psi / 1e9, 3).c_str(), opt.optimizer.c_str(),
                opt.grad_dtype.c_str(), zb::backend_name(comm.backend()));
    zb::Table table({"stage", "bytes/param formula", "measured", "tracked", "volume ideal(Psi)",
                     "measured(Psi)", "step(ms)", "wrong"});
    for (const auto& r : rows)
      table.add_row({r.stage, zb::fmt(r.formula, 3), zb::fmt(r.measured, 3), zb::fmt(r.tracked, 3),
                     zb::fmt(r.volume, 4), zb::fmt(r.volume_measured, 4), zb::fmt(r.step_s * 1e3, 2),
                     zb::fmt(r.wrong, 0)});
    table.print(stdout);
    std::printf("# bytes/param measured: %s growth while the state was allocated\n",
                comm.memKind() == zb::MemKind::device ? "cudaMemGetInfo" : "resident-set");
    if (!measurable)
      std::printf("# volume measured: n/a: %s\n", n == 1 ? "one rank moves nothing" : why_not.c_str());
  }
  return code;
}
