// Pipeline ZeRO: a step's set-up: this rank's chunks, laid out, and the stage's state on them.
#include <string>

#include "harness/pipeline/pipeline_step.h"
#include "harness/plan/pipeline_formula.h"

namespace zb {

PipelineStep::PipelineStep(Communicator& comm, Compute& compute, const PipelineConfig& config,
                           PipelineLayout layout, std::unique_ptr<StageState> state)
    : comm_(comm), compute_(compute), config_(config), layout_(std::move(layout)), state_(std::move(state)),
      model_(state_->model()), flat_(state_->layout()), order_(pipeline_order(config.shape)),
      idle_before_(order_.size(), 0.0), rank_(state_->place().shard_rank), ranks_(state_->place().ranks),
      waits_(comm, compute, trace_) {
  weights_ready_.resize(flat_.units.size());
}

Status PipelineStep::create(Communicator& comm, Compute& compute, const ModelSpec& model,
                            const PipelineConfig& config, std::unique_ptr<PipelineStep>* out) {
  if (!is_pipeline_stage(config.stage))
    return Status::error(std::string(stage_name(config.stage)) +
                         " shards the weights, which a pipeline would gather for every micro-batch; "
                         "use dp, z1 or z2");
  ZB_RETURN_IF_ERROR(check_pipeline(config.shape));
  const int n = comm.size();
  PipelineLayout layout;
  ZB_RETURN_IF_ERROR(make_pipeline_layout(model, config.shape, config.bucket_elems, n,
                                          stage_model(config.stage).shards_anything() ? n : 1, &layout));
  // The state's slots are the formula's: two where gradients are sharded (gradient_slots).
  std::unique_ptr<StageState> state;
  ZB_RETURN_IF_ERROR(StageState::create(comm, compute, config, layout.flat, Placement(), &state));
  *out = std::unique_ptr<PipelineStep>(new PipelineStep(comm, compute, config, std::move(layout), std::move(state)));
  return Status::ok();
}

Status PipelineStep::reset() {
  ZB_RETURN_IF_ERROR(finish());
  pending_.clear();
  return state_->reset();
}

Status PipelineStep::finish() { return comm_.synchronize(); }

}  // namespace zb
