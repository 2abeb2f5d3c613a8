// The optimizer step of each ZeRO stage: reduce, update, gather, each part timed.
#include "bench/optimizer_step.h"

#include "harness/core/clock.h"

namespace zb {

Status run_step_benchmark(Run& run, Compute& compute, const StepSetup& setup, StepResult* out) {
  Driver& d = run.driver();
  Communicator& comm = d.comm();
  const int n = comm.size();
  // One equal "layer" per bucket, each its own unit: each bucket is one collective, padded to
  // a multiple of N when the stage shards it.
  ModelSpec model;
  ZB_RETURN_IF_ERROR(make_model("", double(setup.params), setup.buckets, &model));
  ZeroConfig config;
  static_cast<StageConfig&>(config) = setup;  // the test fault too: the state plants it in step 1
  config.bucket_elems = 1;
  std::unique_ptr<ZeroStep> z;
  ZB_RETURN_IF_ERROR(ZeroStep::create(comm, compute, model, config, &z));
  const FlatLayout& layout = z->layout();
  const size_t gsz = dtype_size(setup.grad_dtype);
  // Where backward would leave it: this rank's whole local gradient. The reduction reads it
  // and writes the stage's gradient state, so every timed step starts from the same input.
  Buffer local;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute.kind(), layout.padded * gsz, &local));
  ZB_RETURN_IF_ERROR(z->begin_step());
  ZB_RETURN_IF_ERROR(z->local_gradient(local.data()));
  out->padding = layout.padding();

  // Each part is timed on this rank's clock and handed to the driver, which reduces the parts
  // as it reduces the step, after the loop, so no reduction of ours runs inside a timed step.
  auto once = [&]() -> Status {
    double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(z->reduce_gradient(local.data()));
    double t1 = now_seconds();
    ZB_RETURN_IF_ERROR(z->begin_step());
    ZB_RETURN_IF_ERROR(z->update_owned());
    double t2 = now_seconds();
    ZB_RETURN_IF_ERROR(z->gather_updated());
    const StageModel& m = stage_model(setup.stage);
    double t3 = m.all_gathers() && !m.shards_weights() ? now_seconds() : t2;  // else exactly 0
    run.sample("reduce", t1 - t0);
    run.sample("update", t2 - t1);
    run.sample("gather", t3 - t2);
    return Status::ok();
  };
  Timing t;
  ZB_RETURN_IF_ERROR(run.per_iteration(once, &t));
  run.report(t);
  out->reduce_s = t.side("reduce");
  out->update_s = t.side("update");
  out->gather_s = t.side("gather");
  out->step_s = out->reduce_s + out->update_s + out->gather_s;

  if (setup.check) {
    // Replays a few steps from the initial state with gradients computed from each step's
    // weights, so a wrong gather or reduction changes later steps too; then the ZeRO step's
    // own check against the single-process reference.
    ZB_RETURN_IF_ERROR(z->reset());
    for (int64_t s = 1; s <= kCheckSteps; ++s) {
      ZB_RETURN_IF_ERROR(z->begin_step());
      ZB_RETURN_IF_ERROR(z->local_gradient(local.data()));
      ZB_RETURN_IF_ERROR(z->reduce_gradient(local.data()));
      ZB_RETURN_IF_ERROR(z->update_owned());
      ZB_RETURN_IF_ERROR(z->gather_updated());
    }
    std::vector<Segment> segs = z->check_segments();
    CheckState got, want;
    ZB_RETURN_IF_ERROR(z->state_to_host(segs, &got));
    ZB_RETURN_IF_ERROR(reference_state(config, n, kCheckSteps, segs, compute, &want));
    out->wrong = d.sum_over_ranks(double(count_mismatches(got, want)));
  }

  const uint64_t owned = stage_model(setup.stage).shards_optimizer() ? layout.shard() : layout.padded;
  run.counter("ranks", n);
  run.counter("params", double(layout.params));
  run.counter("padding", double(layout.padding()));
  run.counter("state_params", double(owned));
  run.counter("reduce_s", out->reduce_s);
  run.counter("update_s", out->update_s);
  run.counter("gather_s", out->gather_s);
  run.counter("step_s", out->step_s);
  run.counter("update_GBps", double(update_bytes_per_param(setup.optimizer.kind, setup.grad_dtype)) *
                                 double(owned) / out->update_s / 1e9);
  run.counter("wrong", setup.check ? out->wrong : NAN);
  return Status::ok();
}

}  // namespace zb
