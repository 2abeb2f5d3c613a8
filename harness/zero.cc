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
  if (st == Stage::z3)
    for (auto& s : gathered_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * 2, &s));
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

// The backward of unit `u`, layer by layer in reverse: each layer's gradient from its
// current weights (`weights` and `grad` point at the unit's start), then the padding.
Status ZeroStep::backward_into(const Unit& u, const Bf16* weights, void* grad) {
  for (int l = u.end_layer - 1; l >= u.first_layer; --l) {
    uint64_t off = layout_.layer_offset[size_t(l)] - u.offset;
    uint64_t n = (l + 1 < u.end_layer ? layout_.layer_offset[size_t(l) + 1] : u.offset + u.params) -
                 layout_.layer_offset[size_t(l)];
    ZB_RETURN_IF_ERROR(compute_.synthetic_grad(weights + off, grad_at(grad, off), config_.grad_dtype,
                                               n, u.offset + off, rank_, ranks_, step_));
  }
  if (u.padded > u.params)
    ZB_RETURN_IF_ERROR(compute_.synthetic_grad(weights + u.params, grad_at(grad, u.params),
                                               config_.grad_dtype, u.padded - u.params,
                                               u.offset + u.params, rank_, ranks_, step_));
  if (config_.corrupt && step_ == 1) {
    // The fault the tests use to prove the reference check can fail: one element off.
    ZB_RETURN_IF_ERROR(compute_.synchronize());
    float one = 1.0f;
    Bf16 one_bf16 = float_to_bf16(one);
    const void* src = config_.grad_dtype == DType::bf16 ? static_cast<const void*>(&one_bf16) : &one;
    ZB_RETURN_IF_ERROR(copy_bytes(grad, tracker_.kind(), src, MemKind::host, dtype_size(config_.grad_dtype)));
  }
  // Collectives read what compute wrote: on a GPU the compute stream must drain first.
  return compute_.synchronize();
}

Status ZeroStep::step() {
  ++step_;
  switch (config_.stage) {
    case Stage::dp: return step_dp();
    case Stage::z1:
    case Stage::z2: return step_z1_z2();
    case Stage::z3: return step_z3();
  }
  return Status::ok();
}

// dp: each bucket's gradients are all-reduced in place as soon as backward fills it;
// the optimizer waits once, then updates every parameter.
Status ZeroStep::step_dp() {
  Bf16* w = weights_.as<Bf16>();
  DType gd = config_.grad_dtype;
  for (auto u = layout_.units.rbegin(); u != layout_.units.rend(); ++u) {
    ZB_RETURN_IF_ERROR(backward_into(*u, w + u->offset, grad_at(grads_.data(), u->offset)));
    void* bucket = grad_at(grads_.data(), u->offset);
    ZB_RETURN_IF_ERROR(comm_.allReduce(bucket, bucket, u->padded, gd));
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  ZB_RETURN_IF_ERROR(compute_.update(config_.optimizer, grads_.data(), gd, master_.as<float>(),
                                     m_.as<float>(), v_.as<float>(), w, layout_.padded, step_,
                                     1.0f / float(ranks_)));
  return compute_.synchronize();
}

// z1 keeps full gradients and reduce-scatters each bucket in place (the own block of the
// full buffer receives the sum); z2 builds each bucket in a transient slot and keeps only
// the own block in its sharded gradient buffer. Both then update the own block and
// all-gather the BF16 weights.
Status ZeroStep::step_z1_z2() {
  Bf16* w = weights_.as<Bf16>();
  DType gd = config_.grad_dtype;
  int i = 0;
  for (auto u = layout_.units.rbegin(); u != layout_.units.rend(); ++u, ++i) {
    uint64_t block = layout_.block(*u);
    if (config_.stage == Stage::z1) {
      void* bucket = grad_at(grads_.data(), u->offset);
      ZB_RETURN_IF_ERROR(backward_into(*u, w + u->offset, bucket));
      ZB_RETURN_IF_ERROR(comm_.reduceScatter(bucket, grad_at(grads_.data(), layout_.own_offset(*u, rank_)),
                                             block, gd));
    } else {
      Buffer& slot = slot_[i % 2];
      ZB_RETURN_IF_ERROR(comm_.wait(slot_free_[i % 2]));  // its last reduce-scatter is done
      ZB_RETURN_IF_ERROR(backward_into(*u, w + u->offset, slot.data()));
      ZB_RETURN_IF_ERROR(comm_.reduceScatter(slot.data(), grad_at(grads_.data(), layout_.shard_offset(*u)),
                                             block, gd));
      ZB_RETURN_IF_ERROR(comm_.record(&slot_free_[i % 2]));
    }
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  ZB_RETURN_IF_ERROR(update_units());
  ZB_RETURN_IF_ERROR(gather_units());
  return comm_.synchronize();
}

Status ZeroStep::update_units() {
  bool z1 = config_.stage == Stage::z1;
  for (const auto& u : layout_.units) {
    uint64_t so = layout_.shard_offset(u), own = layout_.own_offset(u, rank_);
    float* v = v_.data() ? v_.as<float>() + so : nullptr;
    ZB_RETURN_IF_ERROR(compute_.update(config_.optimizer, grad_at(grads_.data(), z1 ? own : so),
                                       config_.grad_dtype, master_.as<float>() + so,
                                       m_.as<float>() + so, v, weights_.as<Bf16>() + own,
                                       layout_.block(u), step_, 1.0f / float(ranks_)));
  }
  return compute_.synchronize();
}

Status ZeroStep::gather_units() {
  Bf16* w = weights_.as<Bf16>();
  for (const auto& u : layout_.units)
    ZB_RETURN_IF_ERROR(comm_.allGather(w + layout_.own_offset(u, rank_), w + u.offset,
                                       layout_.block(u), DType::bf16));
  return Status::ok();
}

// z3: only the own block of every layer is resident. Each layer is all-gathered before its
// forward and again before its backward, into a transient buffer released after use; its
// gradients are reduce-scattered from a transient slot into the sharded gradient buffer.
Status ZeroStep::step_z3() {
  Bf16* shard_w = weights_.as<Bf16>();
  DType gd = config_.grad_dtype;
  auto gather = [&](const Unit& u, Buffer& into) -> Status {
    ZB_RETURN_IF_ERROR(comm_.allGather(shard_w + layout_.shard_offset(u), into.data(),
                                       layout_.block(u), DType::bf16));
    return comm_.synchronize();
  };
  for (const auto& u : layout_.units) ZB_RETURN_IF_ERROR(gather(u, gathered_[0]));
  int i = 0;
  for (auto u = layout_.units.rbegin(); u != layout_.units.rend(); ++u, ++i) {
    ZB_RETURN_IF_ERROR(gather(*u, gathered_[0]));
    Buffer& slot = slot_[i % 2];
    ZB_RETURN_IF_ERROR(comm_.wait(slot_free_[i % 2]));
    ZB_RETURN_IF_ERROR(backward_into(*u, gathered_[0].as<Bf16>(), slot.data()));
    ZB_RETURN_IF_ERROR(comm_.reduceScatter(slot.data(), grad_at(grads_.data(), layout_.shard_offset(*u)),
                                           layout_.block(*u), gd));
    ZB_RETURN_IF_ERROR(comm_.record(&slot_free_[i % 2]));
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  float* v = v_.data() ? v_.as<float>() : nullptr;
  ZB_RETURN_IF_ERROR(compute_.update(config_.optimizer, grads_.data(), gd, master_.as<float>(),
                                     m_.as<float>(), v, shard_w, layout_.shard(), step_,
                                     1.0f / float(ranks_)));
  return compute_.synchronize();
}

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
