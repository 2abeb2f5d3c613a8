// Recording a ZeRO step's schedule on the recording backend.
#include "harness/predict/record.h"

#include "harness/comm/recorder.h"

namespace zb {

Status record_zero_schedule(const ModelSpec& model, const ZeroConfig& config, int ranks, int rank,
                            int steps, ScheduleLog* log, std::vector<CollRecord>* traffic) {
  log->clear();
  std::unique_ptr<Communicator> comm = make_recording_communicator(rank, ranks, log);
  std::unique_ptr<Compute> compute;
  ZB_RETURN_IF_ERROR(Compute::create(MemKind::reserved, 1, &compute));
  std::unique_ptr<ZeroStep> z;
  ZB_RETURN_IF_ERROR(ZeroStep::create(*comm, *compute, model, config, &z));
  // Communication only: nothing computes on reserved memory, but the step still logs where
  // its compute would run.
  z->set_mode(StepMode::comm_only);
  z->set_schedule_log(log);
  size_t before_last = 0;
  for (int s = 0; s < steps; ++s) {
    before_last = comm->traffic().size();
    ZB_RETURN_IF_ERROR(z->step());
  }
  ZB_RETURN_IF_ERROR(z->finish());
  if (traffic) {
    std::vector<CollRecord> all = comm->traffic().records();
    traffic->assign(all.begin() + ptrdiff_t(before_last), all.end());
  }
  return Status::ok();
}

}  // namespace zb
