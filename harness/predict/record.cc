// Recording a ZeRO step's schedule on the recording backend.
#include "harness/predict/record.h"

#include "harness/comm/recorder.h"

namespace zb {

namespace {

// Runs `steps` steps of a step object on the recorder and keeps the last one's collectives.
template <typename Step>
Status record_steps(Step& step, Communicator& comm, int steps, ScheduleLog* log,
                    std::vector<CollRecord>* traffic) {
  // Communication only: nothing computes on reserved memory, but the step still logs where
  // its compute would run.
  step.set_mode(StepMode::comm_only);
  step.set_schedule_log(log);
  size_t before_last = 0;
  for (int s = 0; s < steps; ++s) {
    before_last = comm.traffic().size();
    ZB_RETURN_IF_ERROR(step.step());
  }
  // What is still in flight after the last step (z1/z2's weight gathers) is waited for
  // outside any step, as the benchmarks wait for it after timing: those waits are not the
  // last step's, so they leave the log.
  const size_t step_ops = log->ops().size();
  ZB_RETURN_IF_ERROR(step.finish());
  log->truncate(step_ops);
  if (traffic) {
    std::vector<CollRecord> all = comm.traffic().records();
    traffic->assign(all.begin() + ptrdiff_t(before_last), all.end());
  }
  return Status::ok();
}

}  // namespace

Status record_zero_schedule(const ModelSpec& model, const ZeroConfig& config, const Topology& topo,
                            int steps, ScheduleLog* log, std::vector<CollRecord>* traffic) {
  log->clear();
  std::unique_ptr<Communicator> comm = make_recording_communicator(topo, log);
  std::unique_ptr<Compute> compute;
  ZB_RETURN_IF_ERROR(Compute::create(MemKind::reserved, 1, &compute));
  std::unique_ptr<ZeroStep> z;
  ZB_RETURN_IF_ERROR(ZeroStep::create(*comm, *compute, model, config, &z));
  return record_steps(*z, *comm, steps, log, traffic);
}

Status record_pipeline_schedule(const ModelSpec& model, const PipelineConfig& config, const ComputeSpec& spec,
                                const Topology& topo, int steps, ScheduleLog* log,
                                std::vector<CollRecord>* traffic) {
  log->clear();
  std::unique_ptr<Communicator> comm = make_recording_communicator(topo, log);
  std::unique_ptr<Compute> compute;
  ZB_RETURN_IF_ERROR(Compute::create(MemKind::reserved, 1, &compute));
  std::unique_ptr<PipelineStep> p;
  ZB_RETURN_IF_ERROR(PipelineStep::create(*comm, *compute, model, config, &p));
  // The schedule's idle slots as zb_pipeline finds them for sleep or spin compute: each
  // virtual stage's layers, forward the spec's time each and backward twice it.
  std::vector<double> fwd, bwd, idle;
  for (const auto& [first, end] : p->layout().virtual_layers) {
    fwd.push_back(spec.seconds * (end - first));
    bwd.push_back(2 * fwd.back());
  }
  ZB_RETURN_IF_ERROR(pipeline_idle(config.shape, fwd, bwd, &idle));
  p->set_idle(idle);
  return record_steps(*p, *comm, steps, log, traffic);
}

}  // namespace zb
