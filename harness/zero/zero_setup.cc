// ZeRO: a step's set-up: the stage's layout and state, and the transient buffers its schedule adds.
#include <string>

#include "harness/zero/zero_step.h"

namespace zb {

ZeroStep::ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config, std::unique_ptr<StageState> state)
    : comm_(comm), compute_(compute), config_(config), state_(std::move(state)), model_(state_->model()),
      layout_(state_->layout()), place_(state_->place()), waits_(comm, compute, trace_) {}

Status ZeroStep::create(Communicator& comm, Compute& compute, const ModelSpec& model,
                        const ZeroConfig& config, std::unique_ptr<ZeroStep>* out) {
  const StageModel& m = stage_model(config.stage);
  // The group the stage shards over: the world, or the node (hsdp). Node-aware stages need
  // every node to hold the same number of ranks, so every rank sees the same layout.
  int n = comm.group_size(m.optimizer_group());
  const bool node_aware = m.reduces_across_nodes() || m.node_weight_copy;
  if (node_aware && comm.group_size(Group::node) * comm.group_size(Group::cross) != comm.size())
    return Status::error(std::string(m.name) + " needs the same number of ranks on every node");
  // Units are padded to a multiple of the group's size only where something is sharded into
  // that many blocks (for hpz a multiple of N is one of S too, so its node copy is whole).
  uint64_t bucket = m.units == UnitKind::layers ? 0 : config.bucket_elems;
  FlatLayout layout = make_layout(model, bucket, n, m.shards_anything() ? n : 1);
  std::unique_ptr<StageState> state;
  ZB_RETURN_IF_ERROR(StageState::create(comm, compute, config, std::move(layout), Placement(), &state));
  auto z = std::unique_ptr<ZeroStep>(new ZeroStep(comm, compute, config, std::move(state)));
  // Sharded weights are gathered a unit at a time into prefetch + 1 transient buffers.
  if (m.shards_weights()) {
    z->gathered_.resize(size_t(config.prefetch) + 1);
    for (Buffer& b : z->gathered_)
      ZB_RETURN_IF_ERROR(z->state_->tracker().allocate(MemCategory::transient, z->state_->max_unit() * 2, &b));
    z->gathered_ready_.resize(z->gathered_.size());
  }
  z->weights_ready_.resize(z->layout_.units.size());
  ZB_RETURN_IF_ERROR(z->create_quantized());
  *out = std::move(z);
  return Status::ok();
}

Status ZeroStep::reset() {
  ZB_RETURN_IF_ERROR(finish());
  return state_->reset();
}

Status ZeroStep::finish() { return comm_.synchronize(); }

}  // namespace zb
