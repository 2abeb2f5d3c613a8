// ZeRO: state, initialisation and the step of each stage, from plain dp to ZeRO-3.
#include "harness/zero.h"

#include <algorithm>

namespace zb {

ZeroStep::ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config,
                   FlatLayout layout)
    : comm_(comm), compute_(compute), config_(config), layout_(std::move(layout)),
      tracker_(compute.kind()), rank_(comm.rank()), ranks_(comm.size()) {
  for (const auto& u : layout_.units) max_unit_ = std::max(max_unit_, u.padded);
}

Status ZeroStep::create(Communicator& comm, Compute& compute, const ModelSpec& model,
                        const ZeroConfig& config, std::unique_ptr<ZeroStep>* out) {
  int n = comm.size();
  bool sharded = config.stage != Stage::dp;
  // ZeRO-3 gathers and reduces layer by layer; the others move gradient buckets.
  uint64_t bucket = config.stage == Stage::z3 ? 0 : config.bucket_elems;
  FlatLayout layout = make_layout(model, bucket, n, sharded ? n : 1);
  auto z = std::unique_ptr<ZeroStep>(new ZeroStep(comm, compute, config, std::move(layout)));
  ZB_RETURN_IF_ERROR(z->allocate_state());
  ZB_RETURN_IF_ERROR(z->init_weights());
  *out = std::move(z);
  return Status::ok();
}

Status ZeroStep::allocate_state() {
  const uint64_t P = layout_.padded, S = layout_.shard();
  const size_t g = dtype_size(config_.grad_dtype);
  const Stage st = config_.stage;
  uint64_t w_elems = st == Stage::z3 ? S : P;
  uint64_t g_elems = st == Stage::dp || st == Stage::z1 ? P : S;
  uint64_t o_elems = st == Stage::dp ? P : S;
  bool adam = config_.optimizer.kind == Optimizer::adam;

  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &before));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::weights, w_elems * 2, &weights_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::grads, g_elems * g, &grads_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::master, o_elems * 4, &master_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &m_));
  if (adam) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &v_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &after));
  measured_state_bytes_ = after - before;

  // Two slots each, so one can fill while the other's collective is still in flight.
  if (st == Stage::z2 || st == Stage::z3)
    for (auto& s : slot_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * g, &s));
  if (st == Stage::z3) {
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
  if (config_.stage == Stage::dp) return compute_.init_weights(master, w, layout_.padded, 0);
  if (config_.stage == Stage::z3) {
    for (const auto& u : layout_.units)
      ZB_RETURN_IF_ERROR(compute_.init_weights(master + layout_.shard_offset(u),
                                               w + layout_.shard_offset(u), layout_.block(u),
                                               layout_.own_offset(u, rank_)));
    return compute_.synchronize();
  }
  // z1, z2: full BF16 weights, FP32 master for the own block only; scratch for the rest.
  Buffer scratch_master, scratch_w;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 4, &scratch_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 2, &scratch_w));
  for (const auto& u : layout_.units) {
    ZB_RETURN_IF_ERROR(compute_.init_weights(scratch_master.as<float>(), w + u.offset, u.padded, u.offset));
    ZB_RETURN_IF_ERROR(compute_.init_weights(master + layout_.shard_offset(u), scratch_w.as<Bf16>(),
                                             layout_.block(u), layout_.own_offset(u, rank_)));
  }
  return compute_.synchronize();
}

char* ZeroStep::grad_at(void* base, uint64_t elems) const {
  return static_cast<char*>(base) + elems * dtype_size(config_.grad_dtype);
}

Status ZeroStep::finish() { return comm_.synchronize(); }

std::vector<Segment> ZeroStep::check_segments() const {
  std::vector<Segment> segs;
  if (config_.stage == Stage::dp) {
    uint64_t per = (layout_.padded + uint64_t(ranks_) - 1) / uint64_t(ranks_);
    uint64_t lo = std::min(layout_.padded, per * uint64_t(rank_));
    uint64_t hi = std::min(layout_.padded, lo + per);
    if (hi > lo) segs.push_back({lo, lo, lo, hi - lo});
    return segs;
  }
  for (const auto& u : layout_.units) {
    uint64_t own = layout_.own_offset(u, rank_);
    uint64_t local = config_.stage == Stage::z3 ? layout_.shard_offset(u) : own;
    segs.push_back({own, local, layout_.shard_offset(u), layout_.block(u)});
  }
  return segs;
}

Status ZeroStep::state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
  *out = CheckState();
  for (const auto& s : segments) {
    size_t at = out->weights.size();
    out->weights.resize(at + s.count);
    out->master.resize(at + s.count);
    ZB_RETURN_IF_ERROR(copy_bytes(out->weights.data() + at, MemKind::host,
                                  weights_.as<Bf16>() + s.local, weights_.kind(), s.count * 2));
    ZB_RETURN_IF_ERROR(copy_bytes(out->master.data() + at, MemKind::host,
                                  master_.as<float>() + s.local_master, master_.kind(), s.count * 4));
  }
  return Status::ok();
}

}  // namespace zb
