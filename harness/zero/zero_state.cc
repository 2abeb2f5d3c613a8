// ZeRO: a stage's resident state, its initialisation, and the parts of it each rank checks.
#include <algorithm>

#include "harness/zero/zero_step.h"

namespace zb {

ZeroStep::ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config,
                   FlatLayout layout)
    : comm_(comm), compute_(compute), config_(config), model_(stage_model(config.stage)),
      layout_(std::move(layout)), tracker_(compute.kind()), rank_(comm.rank()), ranks_(comm.size()),
      shard_rank_(comm.group_rank(model_.optimizer_group())), node_rank_(comm.group_rank(Group::node)),
      node_ranks_(comm.group_size(Group::node)),
      replica_(model_.reduces_across_nodes() ? comm.group_rank(Group::cross) : 0),
      replicas_(model_.reduces_across_nodes() ? comm.group_size(Group::cross) : 1), waits_(comm, compute, trace_) {
  for (const auto& u : layout_.units) max_unit_ = std::max(max_unit_, u.padded);
}

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
  auto z = std::unique_ptr<ZeroStep>(new ZeroStep(comm, compute, config, std::move(layout)));
  ZB_RETURN_IF_ERROR(z->allocate_state());
  // Reserved state (a schedule recorded, not run) has no memory to initialise.
  if (compute.kind() != MemKind::reserved) ZB_RETURN_IF_ERROR(z->init_weights());
  *out = std::move(z);
  return Status::ok();
}

// Each category holds the full padded vector, or this rank's shard of it, as the stage says.
Status ZeroStep::allocate_state() {
  const uint64_t P = layout_.padded, S = layout_.shard();
  const size_t g = dtype_size(config_.grad_dtype);
  uint64_t w_elems = model_.shards_weights() ? S : P;
  uint64_t g_elems = model_.shards_grads() ? S : P;
  uint64_t o_elems = model_.shards_optimizer() ? S : P;
  bool adam = config_.optimizer.kind == Optimizer::adam;

  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &before));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::weights, w_elems * 2, &weights_));
  if (model_.node_weight_copy)
    ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::weights, P / uint64_t(node_ranks_) * 2, &node_weights_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::grads, g_elems * g, &grads_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::master, o_elems * 4, &master_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &m_));
  if (adam) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &v_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &after));
  measured_state_bytes_ = after - before;

  // Sharded gradients are built a unit at a time in transient slots, two so one can fill
  // while the other's reduce-scatter is still in flight.
  if (model_.shards_grads())
    for (auto& s : slot_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * g, &s));
  if (model_.shards_weights()) {
    gathered_.resize(size_t(config_.prefetch) + 1);
    for (auto& s : gathered_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * 2, &s));
    gathered_ready_.resize(gathered_.size());
  }
  weights_ready_.resize(layout_.units.size());
  return Status::ok();
}

Status ZeroStep::init_weights() {
  Bf16* w = weights_.as<Bf16>();
  float* master = master_.as<float>();
  if (!model_.shards_optimizer()) return compute_.init_weights(master, w, layout_.padded, 0);
  if (model_.shards_weights()) {
    for (const auto& u : layout_.units)
      ZB_RETURN_IF_ERROR(compute_.init_weights(master + layout_.shard_offset(u),
                                               w + layout_.shard_offset(u), layout_.block(u),
                                               layout_.own_offset(u, shard_rank_)));
    return compute_.synchronize();
  }
  // Whole BF16 weights, FP32 master for the own block only; scratch for the rest.
  Buffer scratch_master, scratch_w;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 4, &scratch_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 2, &scratch_w));
  for (const auto& u : layout_.units) {
    ZB_RETURN_IF_ERROR(compute_.init_weights(scratch_master.as<float>(), w + u.offset, u.padded, u.offset));
    ZB_RETURN_IF_ERROR(compute_.init_weights(master + layout_.shard_offset(u), scratch_w.as<Bf16>(),
                                             layout_.block(u), layout_.own_offset(u, shard_rank_)));
  }
  return compute_.synchronize();
}

Status ZeroStep::reset() {
  ZB_RETURN_IF_ERROR(finish());
  step_ = 0;
  ZB_RETURN_IF_ERROR(compute_.zero(m_.data(), m_.bytes()));
  if (v_.data()) ZB_RETURN_IF_ERROR(compute_.zero(v_.data(), v_.bytes()));
  return init_weights();
}

char* ZeroStep::grad_at(void* base, uint64_t elems) const {
  return static_cast<char*>(base) + elems * dtype_size(config_.grad_dtype);
}

Status ZeroStep::finish() { return comm_.synchronize(); }

std::vector<Segment> ZeroStep::check_segments() const {
  std::vector<Segment> segs;
  if (!model_.shards_optimizer()) {
    // Every rank holds everything: each checks a 1/N slice, so together they check it once.
    uint64_t per = (layout_.padded + uint64_t(ranks_) - 1) / uint64_t(ranks_);
    uint64_t lo = std::min(layout_.padded, per * uint64_t(rank_));
    uint64_t hi = std::min(layout_.padded, lo + per);
    if (hi > lo) segs.push_back({lo, lo, lo, hi - lo});
    return segs;
  }
  for (const auto& u : layout_.units) {
    uint64_t own = layout_.own_offset(u, shard_rank_);
    uint64_t local = model_.shards_weights() ? layout_.shard_offset(u) : own;
    // Shards replicated across nodes (hsdp): each copy checks its 1/replicas of the block.
    uint64_t block = layout_.block(u), per = (block + uint64_t(replicas_) - 1) / uint64_t(replicas_);
    uint64_t lo = std::min(block, per * uint64_t(replica_)), hi = std::min(block, lo + per);
    if (hi > lo) segs.push_back({own + lo, local + lo, layout_.shard_offset(u) + lo, hi - lo});
  }
  return segs;
}

Status ZeroStep::state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
  return copy_state_to_host(weights_, master_, segments, out);
}

}  // namespace zb
