// ZeRO: one training step of each stage, overlapped as real systems do it. Forward and
// backward walk the layers; collectives go on the communicator's stream, and compute and
// communication are ordered by events only where the data needs it.
#include <chrono>
#include <cstdio>
#include <thread>

#include "harness/zero/zero_step.h"

#include "harness/core/clock.h"

namespace zb {
namespace {

// The test fault --fault-slow-stage: a full step stretched, on its way out, by busy-waiting
// `fraction` of its own duration, a planted regression of this stage's step and of nothing
// else (the split's communication-only and compute-only steps keep their time).
struct StretchedStep {
  double fraction, t0 = fraction > 0 ? now_seconds() : 0;
  ~StretchedStep() {
    if (fraction <= 0) return;
    const double end = now_seconds(), until = end + fraction * (end - t0);
    while (now_seconds() < until) {
    }
  }
};

}  // namespace

Status ZeroStep::step() {
  StretchedStep stretch{mode_ == StepMode::full ? config_.slow_fraction : 0};
  state_->begin_step();
  if (schedule_) schedule_->step();
  waits_.set_host_waits(layer_compute_ && layer_compute_->spec().kind == ComputeSpec::Kind::sleep);
  waits_.begin_step();
  ZB_RETURN_IF_ERROR(forward());
  ZB_RETURN_IF_ERROR(backward());
  ZB_RETURN_IF_ERROR(optimizer());
  if (mode_ == StepMode::full && config_.late_s > 0)  // the test fault --fault-late: a straggler
    std::this_thread::sleep_for(std::chrono::duration<double>(config_.late_s));
  // The engine has finished the step (the optimizer synchronised it), so every wait's marks
  // can be read, and the quantization kernels' events.
  if (qops_) ZB_RETURN_IF_ERROR(qops_->take_seconds(&quantize_s_));
  double tail_s = 0;
  return waits_.totals(&exposed_s_, &tail_s);
}

// Compute that reads what a collective wrote (or overwrites what it reads) starts after it,
// and how long compute stood still for it is the step's exposed communication, measured
// where it happens (ComputeWaits: by the host clock where the host is the engine or stands
// in for it, by events on the stream around a GPU's stream wait).
Status ZeroStep::compute_after(const Event& e) { return waits_.after(e); }

// A unit's gradients from `src` into the gradient state: all-reduced whole where every rank
// updates everything (dp), else reduce-scattered to the own block over the group the state is
// sharded over: in place in the full gradients (z1), or from a transient slot into the
// sharded gradients (z2, z3, hpz; hsdp within the node, then its block all-reduced across
// nodes, which hold copies of the same block). Quantized gradients take qgZ's all-to-alls
// instead of the reduce-scatter (start_reduction).
Status ZeroStep::reduce(const Unit& u, int unit, const void* src) {
  if (mode_ == StepMode::compute_only) return Status::ok();
  if (quant_.grads != GradQuant::none) return start_reduction(u, unit, src);
  DType gd = config_.grad_dtype;
  auto note_unit = [&] {
    if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = unit;
  };
  note_unit();
  char* own = state_->grad_at(state_->grads().data(), state_->grad_offset(u));
  if (model_.all_reduces()) {
    ZB_RETURN_IF_ERROR(comm_.all_reduce(src, state_->grad_at(state_->grads().data(), u.offset), u.padded, gd));
  } else {
    ZB_RETURN_IF_ERROR(comm_.reduce_scatter(src, own, layout_.block(u), gd, model_.optimizer_group()));
    if (model_.reduces_across_nodes() && place_.replicas > 1) {
      note_unit();
      ZB_RETURN_IF_ERROR(comm_.all_reduce(own, own, layout_.block(u), gd, Group::cross));
    }
  }
  if (config_.overlap) return Status::ok();
  Event done;  // serialised: compute waits for it, and that wait is exposed
  ZB_RETURN_IF_ERROR(comm_.record(&done));
  return compute_after(done);
}

// Sharded weights are gathered into a transient buffer, over the group they are sharded
// over; whole weights updated shard by shard (z1, z2) are gathered in place. hpz's backward
// gathers from its node copy, within the node. Quantized weights travel as pieces into a
// buffer of their own (quantized_gather), dequantized where they are used.
Status ZeroStep::gather(int unit, size_t buffer, Event* done, bool backward) {
  if (mode_ == StepMode::compute_only) return Status::ok();
  const Unit& u = layout_.units[size_t(unit)];
  Bf16* w = state_->weights().as<Bf16>();
  Bf16* into = gathered_.empty() ? nullptr : gathered_[buffer].as<Bf16>();
  if (quant_.weights != WeightQuant::none && !(backward && model_.node_weight_copy)) {
    ZB_RETURN_IF_ERROR(quantized_gather(unit, buffer, model_.weight_group()));
  } else if (backward && model_.node_weight_copy) {
    if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = unit;
    const uint64_t part = u.padded / uint64_t(place_.node_ranks);
    const Bf16* node_copy = state_->node_weights().as<Bf16>() + u.offset / uint64_t(place_.node_ranks);
    ZB_RETURN_IF_ERROR(comm_.all_gather(node_copy, into, part, DType::bf16, Group::node));
  } else {
    if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = unit;
    Bf16* to = model_.shards_weights() ? into : w + u.offset;
    Group g = model_.shards_weights() ? model_.weight_group() : model_.optimizer_group();
    ZB_RETURN_IF_ERROR(comm_.all_gather(w + state_->weight_offset(u), to, layout_.block(u), DType::bf16, g));
  }
  ZB_RETURN_IF_ERROR(comm_.record(done));
  return config_.overlap ? Status::ok() : compute_after(*done);
}

// Sharded weights (z3), gathered unit by unit in the step's order of use: forward 0..U-1,
// then backward U-1..0.
// The gather for position pos+prefetch is issued before waiting for position pos, into the
// buffer position pos-1 has just finished with; the order runs on from forward into
// backward, so backward's first layers are gathered while forward's last ones compute.
// Backward gathers the last layer again although a buffer may still hold it: every layer
// is gathered twice, the 2 psi of all-gathers in z3's 3 psi, as the article counts it.
Status ZeroStep::gathered_weights(size_t pos, Bf16** weights) {
  const size_t units = layout_.units.size();
  ZB_RETURN_IF_ERROR(issue_gathers(pos));
  size_t b = pos % gathered_.size();
  ZB_RETURN_IF_ERROR(compute_after(gathered_ready_[b]));
  if (gathers_quantized(pos)) ZB_RETURN_IF_ERROR(dequantize_gathered(int(pos < units ? pos : 2 * units - 1 - pos), b));
  *weights = gathered_[b].as<Bf16>();
  if (model_.node_weight_copy && pos < units) {
    ZB_RETURN_IF_ERROR(keep_node_copy(pos, *weights));
    ZB_RETURN_IF_ERROR(issue_gathers(pos));  // a backward gather that waited for this copy
  }
  return Status::ok();
}

// Issues the gathers due by position `pos`, each into the buffer the position before has
// just finished with. hpz's backward gather of a unit reads the node copy that forward cuts
// from the same unit, so it waits until forward has cut it.
Status ZeroStep::issue_gathers(size_t pos) {
  const size_t units = layout_.units.size(), nbuf = gathered_.size();
  const size_t ahead = config_.overlap ? nbuf - 1 : 0;
  auto unit_at = [&](size_t p) { return int(p < units ? p : 2 * units - 1 - p); };
  auto ready = [&](size_t p) { return !model_.node_weight_copy || p < units || 2 * units - 1 - p < copies_done_; };
  while (issued_pos_ < 2 * units && issued_pos_ <= pos + ahead && ready(issued_pos_)) {
    size_t b = issued_pos_ % nbuf;
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // its last reader is done
    ZB_RETURN_IF_ERROR(gather(unit_at(issued_pos_), b, &gathered_ready_[b], issued_pos_ >= units));
    ++issued_pos_;
  }
  return Status::ok();
}

// hpz: this rank's 1/S of the unit forward just gathered, kept for backward's node gather.
// A copy on the compute engine, after the gather it reads; no communication.
Status ZeroStep::keep_node_copy(size_t pos, const Bf16* gathered) {
  const Unit& u = layout_.units[pos];
  const uint64_t part = u.padded / uint64_t(place_.node_ranks);
  ++copies_done_;
  if (!computing()) return Status::ok();
  return compute_.copy(state_->node_weights().as<Bf16>() + u.offset / uint64_t(place_.node_ranks),
                       gathered + uint64_t(place_.node_rank) * part, part * 2);
}

Status ZeroStep::forward() {
  const auto& units = layout_.units;
  issued_pos_ = 0;
  copies_done_ = 0;
  if (quant_.weights == WeightQuant::fp8) ZB_RETURN_IF_ERROR(exchange_amax());
  for (size_t pos = 0; pos < units.size(); ++pos) {
    const Unit& u = units[pos];
    Bf16* gathered = nullptr;
    if (model_.shards_weights()) ZB_RETURN_IF_ERROR(gathered_weights(pos, &gathered));
    else if (model_.all_gathers())
      ZB_RETURN_IF_ERROR(compute_after(weights_ready_[pos]));  // only this bucket's weights
    for (int l = u.first_layer; l < u.end_layer; ++l) {
      TraceScope span(&trace_, "forward L" + std::to_string(l), "\"layer\": " + std::to_string(l));
      if (schedule_) schedule_->compute("forward", l);
      if (layer_compute_ && computing()) ZB_RETURN_IF_ERROR(layer_compute_->forward(l));
    }
  }
  return Status::ok();
}

Status ZeroStep::layer_backward(const Unit& u, int l, const Bf16* weights, void* grad) {
  TraceScope span(&trace_, "backward L" + std::to_string(l), "\"layer\": " + std::to_string(l));
  uint64_t off = layout_.layer_offset[size_t(l)] - u.offset;
  uint64_t end = l + 1 < u.end_layer ? layout_.layer_offset[size_t(l) + 1] - u.offset : u.params;
  if (schedule_) schedule_->kernel("backward", l, dtype_name(config_.grad_dtype), double(end - off));
  if (!computing()) return Status::ok();
  if (layer_compute_) ZB_RETURN_IF_ERROR(layer_compute_->backward(l));
  return compute_.synthetic_grad(weights + off, state_->grad_at(grad, off), config_.grad_dtype, end - off,
                                 u.offset + off, place_.rank, place_.ranks, state_->step());
}

Status ZeroStep::padding_grad(const Unit& u, const Bf16* weights, void* grad) {
  if (!computing() || u.padded == u.params) return Status::ok();
  return compute_.synthetic_grad(weights + u.params, state_->grad_at(grad, u.params), config_.grad_dtype,
                                 u.padded - u.params, u.offset + u.params, place_.rank, place_.ranks,
                                 state_->step());
}

// Backward in reverse; each unit's reduction is issued the moment its gradients are
// complete. Sharded gradients are built in two alternating slots, so a slot is refilled
// only once its previous reduce-scatter is done.
Status ZeroStep::backward() {
  const auto& units = layout_.units;
  for (size_t pos = 0; pos < units.size(); ++pos) {
    const int unit = int(units.size() - 1 - pos);
    const Unit& u = units[size_t(unit)];
    Bf16* w = state_->weights().as<Bf16>() + u.offset;
    void* grad = state_->grad_at(state_->grads().data(), u.offset);
    const bool slotted = model_.shards_grads();
    // qgZ quantizes the slot as its reduction starts: the slot is free once that kernel has run.
    const bool slot_waits = slotted && quant_.grads == GradQuant::none;
    if (model_.shards_weights()) ZB_RETURN_IF_ERROR(gathered_weights(units.size() + pos, &w));
    if (slotted) {
      if (slot_waits) ZB_RETURN_IF_ERROR(compute_after(slot_free_[pos % 2]));
      grad = state_->slot(pos % 2).data();
    }
    for (int l = u.end_layer - 1; l >= u.first_layer; --l) ZB_RETURN_IF_ERROR(layer_backward(u, l, w, grad));
    ZB_RETURN_IF_ERROR(padding_grad(u, w, grad));
    ZB_RETURN_IF_ERROR(state_->plant_fault(grad));  // the first gradient of step 1, when asked
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // it reads what compute wrote
    ZB_RETURN_IF_ERROR(reduce(u, unit, grad));
    if (slot_waits) ZB_RETURN_IF_ERROR(comm_.record(&slot_free_[pos % 2]));
  }
  return Status::ok();
}

// The optimizer's compute waits for every reduction (that wait is exposed), and the host
// waits too, bounded by the timeout, so a lost collective is an error rather than a stalled
// stream (on GPU that wait also covers the compute the last reduction is queued behind). It
// updates what this rank owns unit by unit and, where weights are held whole but updated
// shard by shard (z1, z2), issues each unit's weight all-gather as soon as that unit is
// updated; the next forward waits for them unit by unit.
Status ZeroStep::optimizer() {
  ZB_RETURN_IF_ERROR(drain_reductions());
  Event reduced;
  ZB_RETURN_IF_ERROR(comm_.record(&reduced));
  ZB_RETURN_IF_ERROR(compute_after(reduced));
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  const bool gathers = model_.all_gathers() && !model_.shards_weights();
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    ZB_RETURN_IF_ERROR(update_unit(i));
    if (!gathers) continue;
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // it sends the updated block
    ZB_RETURN_IF_ERROR(gather(int(i), 0, &weights_ready_[i]));
  }
  return compute_.synchronize();
}

// The reduced gradient is a sum over ranks; the kernel averages it with its scale.
Status ZeroStep::update_unit(size_t i) {
  const Unit& u = layout_.units[i];
  TraceScope span(&trace_, "optimizer U" + std::to_string(i), "\"unit\": " + std::to_string(i));
  if (schedule_)
    schedule_->kernel("update", int(i), optimizer_name(config_.optimizer.kind), double(state_->owned_count(u)));
  if (!computing()) return Status::ok();
  return state_->update(u, 1.0f / float(place_.ranks));
}

// ---- The optimizer step by itself (zb_optimizer): no overlap, each part waited for.

Status ZeroStep::local_gradient(void* full_grad) {
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    const Bf16* w = state_->weights().as<Bf16>() + u.offset;
    if (model_.shards_weights()) {
      Event done;
      ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
      ZB_RETURN_IF_ERROR(gather(int(i), 0, &done));
      ZB_RETURN_IF_ERROR(comm_.compute_waits_for(done, compute_.stream()));
      if (gathers_quantized(i)) ZB_RETURN_IF_ERROR(dequantize_gathered(int(i), 0));
      w = gathered_[0].as<Bf16>();
    }
    ZB_RETURN_IF_ERROR(compute_.synthetic_grad(w, state_->grad_at(full_grad, u.offset), config_.grad_dtype,
                                               u.padded, u.offset, place_.rank, place_.ranks,
                                               state_->step()));
  }
  // The test fault where step() plants it: backward's first gradient, the last unit's start.
  ZB_RETURN_IF_ERROR(state_->plant_fault(state_->grad_at(full_grad, layout_.units.back().offset)));
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  return comm_.synchronize();
}

Status ZeroStep::reduce_gradient(const void* full_grad) {
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    ZB_RETURN_IF_ERROR(reduce(u, int(i), state_->grad_at(full_grad, u.offset)));
  }
  ZB_RETURN_IF_ERROR(drain_reductions());
  return comm_.synchronize();
}

Status ZeroStep::update_owned() {
  for (size_t i = 0; i < layout_.units.size(); ++i) ZB_RETURN_IF_ERROR(update_unit(i));
  return compute_.synchronize();
}

Status ZeroStep::gather_updated() {
  if (!model_.all_gathers() || model_.shards_weights()) return Status::ok();
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  for (size_t i = 0; i < layout_.units.size(); ++i)
    ZB_RETURN_IF_ERROR(gather(int(i), 0, &weights_ready_[i]));
  return comm_.synchronize();
}

void ZeroStep::add_comm_spans(size_t first, double origin_s, size_t end) {
  zb::add_comm_spans(
      trace_, comm_.traffic(), first, origin_s,
      [this](size_t i) { return "\"unit\": " + std::to_string(i < log_unit_.size() ? log_unit_[i] : -1); }, end);
}

}  // namespace zb
