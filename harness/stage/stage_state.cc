// A stage's per-rank state: allocation by the stage's row, initial values, the test fault, and
// the parts each rank checks.
#include "harness/stage/stage_state.h"

#include <algorithm>
#include <string>

namespace zb {

namespace {

// What the system says `allocate` added to the memory of `kind`, into *grown.
template <typename F>
Status measured(MemKind kind, int64_t* grown, F&& allocate) {
  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(kind, &before));
  ZB_RETURN_IF_ERROR(allocate());
  ZB_RETURN_IF_ERROR(used_memory_bytes(kind, &after));
  *grown += after - before;
  return Status::ok();
}

}  // namespace

StageState::StageState(Communicator& comm, Compute& compute, const StageConfig& config, FlatLayout layout,
                       const Placement& where)
    : compute_(compute), config_(config), model_(stage_model(config.stage)), layout_(std::move(layout)),
      where_(where), tracker_(compute.kind()), host_tracker_(offload_host_kind(compute.kind())) {
  place_.rank = comm.rank();
  place_.ranks = comm.size();
  place_.shard_rank = comm.group_rank(model_.optimizer_group());
  place_.node_rank = comm.group_rank(Group::node);
  place_.node_ranks = comm.group_size(Group::node);
  if (model_.reduces_across_nodes()) {
    place_.replica = comm.group_rank(Group::cross);
    place_.replicas = comm.group_size(Group::cross);
  }
  for (const Unit& u : layout_.units) max_unit_ = std::max(max_unit_, u.padded);
  if (where_.slots < 0) where_.slots = model_.shards_grads() ? 2 : 0;
}

Status StageState::create(Communicator& comm, Compute& compute, const StageConfig& config, FlatLayout layout,
                          const Placement& where, std::unique_ptr<StageState>* out) {
  const StageModel& m = stage_model(config.stage);
  if (where.optimizer_on_host && (m.shards_weights() || !m.shards_optimizer()))
    return Status::error(std::string(m.name) + " cannot keep its optimizer state on the host; z1 and z2 can");
  auto s = std::unique_ptr<StageState>(new StageState(comm, compute, config, std::move(layout), where));
  if (where.optimizer_on_host)
    ZB_RETURN_IF_ERROR(Compute::create(MemKind::host, where.host_threads, &s->host_compute_));
  ZB_RETURN_IF_ERROR(s->allocate());
  // Reserved state (a schedule recorded, not run) has no memory to initialise.
  if (compute.kind() != MemKind::reserved) ZB_RETURN_IF_ERROR(s->init());
  *out = std::move(s);
  return Status::ok();
}

// Each category holds the full padded vector or this rank's shard, as the row says, on the
// compute engine's memory unless placed on the host. Three windows of measurement: the state on
// the engine's memory (its gradient part also alone), the slots (gradient memory too), and what
// lives on the host.
Status StageState::allocate() {
  const uint64_t P = layout_.padded, S = layout_.shard();
  const size_t g = dtype_size(config_.grad_dtype);
  const uint64_t w_elems = model_.shards_weights() ? S : P, g_elems = model_.shards_grads() ? S : P,
                 o_elems = model_.shards_optimizer() ? S : P;
  const bool adam = config_.optimizer.kind == Optimizer::adam;
  auto optimizer_state = [&](MemoryTracker& t) -> Status {
    ZB_RETURN_IF_ERROR(t.allocate(MemCategory::master, o_elems * 4, &master_));
    ZB_RETURN_IF_ERROR(t.allocate(MemCategory::moments, o_elems * 4, &m_));
    if (adam) ZB_RETURN_IF_ERROR(t.allocate(MemCategory::moments, o_elems * 4, &v_));
    return Status::ok();
  };
  const MemKind kind = tracker_.kind();
  ZB_RETURN_IF_ERROR(measured(kind, &state_measured_, [&]() -> Status {
    ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::weights, w_elems * 2, &weights_));
    if (model_.node_weight_copy)
      ZB_RETURN_IF_ERROR(
          tracker_.allocate(MemCategory::weights, P / uint64_t(place_.node_ranks) * 2, &node_weights_));
    if (!where_.grads_on_host)
      ZB_RETURN_IF_ERROR(measured(kind, &grad_measured_, [&] {
        return tracker_.allocate(MemCategory::grads, g_elems * g, &grads_);
      }));
    return where_.optimizer_on_host ? Status::ok() : optimizer_state(tracker_);
  }));
  slot_.resize(size_t(where_.slots));
  ZB_RETURN_IF_ERROR(measured(kind, &grad_measured_, [&]() -> Status {
    for (Buffer& b : slot_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * g, &b));
    return Status::ok();
  }));
  if (!where_.grads_on_host && !where_.optimizer_on_host) return Status::ok();
  return measured(MemKind::host, &host_measured_, [&]() -> Status {
    if (where_.grads_on_host) ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::grads, g_elems * g, &grads_));
    if (!where_.optimizer_on_host) return Status::ok();
    ZB_RETURN_IF_ERROR(optimizer_state(host_tracker_));
    return host_tracker_.allocate(MemCategory::weights, o_elems * 2, &own_weights_);
  });
}

// The same values on every rank and in the reference (kernels/synthetic.h's init_weights of each
// flat index), in three cases: everything whole (dp), in one pass; everything sharded alike
// (z3, hsdp, hpz), block by block; whole weights with a sharded master (z1, z2), each unit's
// weights through a scratch master and the own block's master through scratch weights, the
// master on the engine beside it.
Status StageState::init() {
  Bf16* w = weights_.as<Bf16>();
  float* master = master_.as<float>();
  const int own = place_.shard_rank;
  if (!model_.shards_optimizer()) return compute_.init_weights(master, w, layout_.padded, 0);
  if (model_.shards_weights()) {
    for (const Unit& u : layout_.units)
      ZB_RETURN_IF_ERROR(compute_.init_weights(master + layout_.shard_offset(u), w + layout_.shard_offset(u),
                                               layout_.block(u), layout_.own_offset(u, own)));
    return compute_.synchronize();
  }
  Compute& opt = optimizer_compute();
  Buffer scratch_master, scratch_w;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 4, &scratch_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(opt.kind(), max_unit_ * 2, &scratch_w));
  for (const Unit& u : layout_.units) {
    ZB_RETURN_IF_ERROR(compute_.init_weights(scratch_master.as<float>(), w + u.offset, u.padded, u.offset));
    ZB_RETURN_IF_ERROR(opt.init_weights(master + layout_.shard_offset(u), scratch_w.as<Bf16>(), layout_.block(u),
                                        layout_.own_offset(u, own)));
  }
  if (&opt != &compute_) ZB_RETURN_IF_ERROR(opt.synchronize());
  return compute_.synchronize();
}

uint64_t StageState::owned_flat(const Unit& u) const {
  return model_.shards_optimizer() ? layout_.own_offset(u, place_.shard_rank) : u.offset;
}
uint64_t StageState::owned_count(const Unit& u) const {
  return model_.shards_optimizer() ? layout_.block(u) : u.padded;
}
uint64_t StageState::state_offset(const Unit& u) const {
  return model_.shards_optimizer() ? layout_.shard_offset(u) : u.offset;
}
uint64_t StageState::grad_offset(const Unit& u) const {
  return model_.shards_grads() ? layout_.shard_offset(u) : owned_flat(u);
}
uint64_t StageState::weight_offset(const Unit& u) const {
  return model_.shards_weights() ? layout_.shard_offset(u) : owned_flat(u);
}
char* StageState::grad_at(const void* base, uint64_t elems) const {
  return static_cast<char*>(const_cast<void*>(base)) + elems * dtype_size(config_.grad_dtype);
}

// A host optimizer writes the host's BF16 copy of the own block, which the schedule brings back
// to the device; otherwise the update writes the weights in place.
Status StageState::update(const Unit& u, float scale, const void* grad) {
  const uint64_t so = state_offset(u);
  float* v = v_.data() ? v_.as<float>() + so : nullptr;
  Bf16* w = own_weights_.data() ? own_weights_.as<Bf16>() + so : weights_.as<Bf16>() + weight_offset(u);
  return optimizer_compute().update(config_.optimizer, grad ? grad : grad_at(grads_.data(), grad_offset(u)),
                                    config_.grad_dtype, master_.as<float>() + so, m_.as<float>() + so, v, w,
                                    owned_count(u), step_, scale);
}

int64_t StageState::begin_step() {
  ++step_;
  fault_armed_ = config_.corrupt && step_ == 1;
  return step_;
}

Status StageState::reset() {
  step_ = 0;
  ZB_RETURN_IF_ERROR(optimizer_compute().zero(m_.data(), m_.bytes()));
  if (v_.data()) ZB_RETURN_IF_ERROR(optimizer_compute().zero(v_.data(), v_.bytes()));
  return init();
}

Status StageState::plant_fault(void* grad) {
  if (!fault_armed_) return Status::ok();
  fault_armed_ = false;
  const float one = 1.0f;
  const Bf16 one_bf16 = float_to_bf16(one);
  const void* src = config_.grad_dtype == DType::bf16 ? static_cast<const void*>(&one_bf16) : &one;
  return compute_.copy(grad, src, dtype_size(config_.grad_dtype));
}

std::vector<Segment> StageState::check_segments() const {
  std::vector<Segment> segs;
  if (!model_.shards_optimizer()) {
    // Every rank holds everything: each checks a 1/N slice, so together they check it once.
    const uint64_t ranks = uint64_t(place_.ranks), per = (layout_.padded + ranks - 1) / ranks;
    const uint64_t lo = std::min(layout_.padded, per * uint64_t(place_.rank)), hi = std::min(layout_.padded, lo + per);
    if (hi > lo) segs.push_back({lo, lo, lo, hi - lo});
    return segs;
  }
  const uint64_t replicas = uint64_t(place_.replicas);
  for (const Unit& u : layout_.units) {
    const uint64_t own = layout_.own_offset(u, place_.shard_rank);
    const uint64_t local = model_.shards_weights() ? layout_.shard_offset(u) : own;
    // Shards replicated across nodes (hsdp): each copy checks its 1/replicas of the block.
    const uint64_t block = layout_.block(u), per = (block + replicas - 1) / replicas;
    const uint64_t lo = std::min(block, per * uint64_t(place_.replica)), hi = std::min(block, lo + per);
    if (hi > lo) segs.push_back({own + lo, local + lo, layout_.shard_offset(u) + lo, hi - lo});
  }
  return segs;
}

Status StageState::to_host(const std::vector<Segment>& segments, CheckState* out) const {
  return copy_state_to_host(weights_, master_, segments, out);
}

}  // namespace zb
