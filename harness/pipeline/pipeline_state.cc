// Pipeline ZeRO: a pipeline stage's resident state, its initialisation, and the parts of it each
// rank checks.
#include <algorithm>
#include <string>

#include "harness/pipeline/pipeline_step.h"
#include "harness/plan/pipeline_formula.h"

namespace zb {

PipelineStep::PipelineStep(Communicator& comm, Compute& compute, const PipelineConfig& config,
                           PipelineLayout layout)
    : comm_(comm), compute_(compute), config_(config), model_(stage_model(config.stage)),
      layout_(std::move(layout)), order_(pipeline_order(config.shape)),
      idle_before_(order_.size(), 0.0), tracker_(compute.kind()), rank_(comm.rank()),
      ranks_(comm.size()), waits_(comm, compute, trace_) {
  for (const auto& u : layout_.flat.units) max_unit_ = std::max(max_unit_, u.padded);
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
  auto p = std::unique_ptr<PipelineStep>(new PipelineStep(comm, compute, config, std::move(layout)));
  ZB_RETURN_IF_ERROR(p->allocate_state());
  // Reserved state (a schedule recorded, not run) has no memory to initialise.
  if (compute.kind() != MemKind::reserved) ZB_RETURN_IF_ERROR(p->init_weights());
  *out = std::move(p);
  return Status::ok();
}

// Weights are whole; gradients are the full accumulation buffer or the own shard, and the
// optimizer state the full vector or the own shard, as the stage's row says. The gradient
// memory is also measured alone: the buffer or shard, plus z2's two slots.
Status PipelineStep::allocate_state() {
  const FlatLayout& lay = layout_.flat;
  const uint64_t P = lay.padded, S = lay.shard();
  const size_t g = dtype_size(config_.grad_dtype);
  const uint64_t g_elems = model_.shards_grads() ? S : P, o_elems = model_.shards_optimizer() ? S : P;
  int64_t before = 0, after = 0, g0 = 0, g1 = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &before));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::weights, P * 2, &weights_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &g0));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::grads, g_elems * g, &grads_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &g1));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::master, o_elems * 4, &master_));
  ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &m_));
  if (config_.optimizer.kind == Optimizer::adam)
    ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::moments, o_elems * 4, &v_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &after));
  measured_state_bytes_ = after - before;
  measured_grad_bytes_ = g1 - g0;
  if (gradient_slots(config_.stage) > 0) {
    ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &g0));
    for (auto& s : slot_) ZB_RETURN_IF_ERROR(tracker_.allocate(MemCategory::transient, max_unit_ * g, &s));
    ZB_RETURN_IF_ERROR(used_memory_bytes(tracker_.kind(), &g1));
    measured_grad_bytes_ += g1 - g0;
  }
  weights_ready_.resize(lay.units.size());
  return Status::ok();
}

// The same initial values as zb_zero: whole BF16 weights everywhere, the FP32 master for
// what this rank updates (everything for dp, its own block of every unit otherwise).
Status PipelineStep::init_weights() {
  const FlatLayout& lay = layout_.flat;
  Bf16* w = weights_.as<Bf16>();
  float* master = master_.as<float>();
  if (!model_.shards_optimizer()) return compute_.init_weights(master, w, lay.padded, 0);
  Buffer scratch_master, scratch_w;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 4, &scratch_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 2, &scratch_w));
  for (const auto& u : lay.units) {
    ZB_RETURN_IF_ERROR(compute_.init_weights(scratch_master.as<float>(), w + u.offset, u.padded, u.offset));
    ZB_RETURN_IF_ERROR(compute_.init_weights(master + lay.shard_offset(u), scratch_w.as<Bf16>(),
                                             lay.block(u), lay.own_offset(u, rank_)));
  }
  return compute_.synchronize();
}

Status PipelineStep::reset() {
  ZB_RETURN_IF_ERROR(finish());
  step_ = 0;
  pending_.clear();
  ZB_RETURN_IF_ERROR(compute_.zero(m_.data(), m_.bytes()));
  if (v_.data()) ZB_RETURN_IF_ERROR(compute_.zero(v_.data(), v_.bytes()));
  return init_weights();
}

Status PipelineStep::finish() { return comm_.synchronize(); }

char* PipelineStep::grad_at(void* base, uint64_t elems) const {
  return static_cast<char*>(base) + elems * dtype_size(config_.grad_dtype);
}

std::vector<Segment> PipelineStep::check_segments() const {
  const FlatLayout& lay = layout_.flat;
  std::vector<Segment> segs;
  if (!model_.shards_optimizer()) {
    // Every rank holds everything: each checks a 1/N slice, so together they check it once.
    uint64_t per = (lay.padded + uint64_t(ranks_) - 1) / uint64_t(ranks_);
    uint64_t lo = std::min(lay.padded, per * uint64_t(rank_)), hi = std::min(lay.padded, lo + per);
    if (hi > lo) segs.push_back({lo, lo, lo, hi - lo});
    return segs;
  }
  for (const auto& u : lay.units) {
    uint64_t own = lay.own_offset(u, rank_);
    segs.push_back({own, own, lay.shard_offset(u), lay.block(u)});
  }
  return segs;
}

Status PipelineStep::state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
  return copy_state_to_host(weights_, master_, segments, out);
}

}  // namespace zb
