// Pipeline ZeRO: one step of a pipeline stage under dp, z1 or z2. The schedule's forwards and
// backwards run on the compute engine with its idle slots; gradient reductions go on the
// communicator's stream as soon as what they reduce is complete.
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "harness/pipeline/pipeline_step.h"

namespace zb {

Status PipelineStep::step() {
  state_->begin_step();
  waits_.set_host_waits(layer_compute_ && layer_compute_->spec().kind == ComputeSpec::Kind::sleep);
  waits_.begin_step();
  if (schedule_) schedule_->step();
  for (size_t i = 0; i < order_.size(); ++i) {
    if (schedule_ && idle_before_[i] > 0) schedule_->idle(idle_before_[i]);
    if (computing()) ZB_RETURN_IF_ERROR(idle(idle_before_[i]));
    ZB_RETURN_IF_ERROR(order_[i].forward ? forward(order_[i]) : backward(order_[i]));
  }
  // Every schedule ends with a backward: whatever compute waits for from here on is
  // communication the backward did not hide.
  waits_.begin_tail();
  ZB_RETURN_IF_ERROR(optimizer());
  return waits_.totals(&exposed_s_, &tail_s_);
}

// An idle slot of the schedule: the previous stage's activations or the next stage's
// gradients have not arrived. On a GPU the stream drains first, so the engine, not only the
// host, stands idle; collectives in flight go on meanwhile.
Status PipelineStep::idle(double seconds) {
  if (!(seconds > 0)) return Status::ok();
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  static thread_local bool precise = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;  // see layer_compute.cc
  (void)precise;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return Status::ok();
}

static std::string op_args(int chunk, int microbatch) {
  return "\"chunk\": " + std::to_string(chunk) + ", \"microbatch\": " + std::to_string(microbatch);
}

// A chunk's first forward of the step reads the weights the last optimizer updated, so it
// waits for their gathers (z1, z2), bucket by bucket; later micro-batches find them there.
Status PipelineStep::forward(const PipeOp& op) {
  const auto [first, end] = layout_.chunk_units[size_t(op.chunk)];
  const bool gathered = model_.all_gathers() > 0;
  if (op.microbatch == 0 && gathered)
    for (int u = first; u < end; ++u) ZB_RETURN_IF_ERROR(waits_.after(weights_ready_[size_t(u)]));
  const std::string name = "forward c" + std::to_string(op.chunk) + " mb" + std::to_string(op.microbatch);
  TraceScope span(&trace_, name, op_args(op.chunk, op.microbatch));
  for (int l = flat_.units[size_t(first)].first_layer; l < flat_.units[size_t(end) - 1].end_layer; ++l) {
    if (schedule_) schedule_->compute("forward", layout_.layers[size_t(l)]);
    if (computing() && layer_compute_) ZB_RETURN_IF_ERROR(layer_compute_->forward(layout_.layers[size_t(l)]));
  }
  return Status::ok();
}

// Backward of one chunk for one micro-batch, bucket by bucket from the last. Whole gradients
// (dp, z1) accumulate into the buffer (the first micro-batch writes it) and each bucket is
// reduced once, when the chunk's last micro-batch has filled it. Sharded ones (z2) are built
// in two alternating slots and every bucket is reduce-scattered at once, for every micro-batch;
// a slot is refilled only once its reduce-scatter is done and its block is in the shard.
Status PipelineStep::backward(const PipeOp& op) {
  const auto [first, end] = layout_.chunk_units[size_t(op.chunk)];
  const bool last = op.microbatch == config_.shape.microbatches - 1;
  for (int u = end - 1; u >= first; --u) {
    const Unit& unit = flat_.units[size_t(u)];
    if (!model_.shards_grads()) {
      void* grad = state_->grad_at(state_->grads().data(), unit.offset);
      ZB_RETURN_IF_ERROR(unit_backward(u, op.microbatch, grad, op.microbatch > 0));
      if (!last) continue;
      ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // it reads what compute wrote
      ZB_RETURN_IF_ERROR(reduce(u, op.microbatch, grad));
      continue;
    }
    const int s = next_slot_;
    next_slot_ ^= 1;
    ZB_RETURN_IF_ERROR(waits_.after(slot_free_[s]));
    if (!pending_.empty() && pending_.front().slot == s) ZB_RETURN_IF_ERROR(add_oldest_pending());
    ZB_RETURN_IF_ERROR(unit_backward(u, op.microbatch, state_->slot(size_t(s)).data(), false));
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
    ZB_RETURN_IF_ERROR(reduce(u, op.microbatch, state_->slot(size_t(s)).data()));
    ZB_RETURN_IF_ERROR(comm_.record(&slot_free_[s]));
    pending_.push_back({s, u, op.microbatch});
  }
  return Status::ok();
}

// A bucket's layers in reverse, each its compute and then its gradient, from the weights and,
// for the exact sums, a rank folded with the micro-batch: micro-batch m of rank r contributes as
// rank m * N + r of M * N would (kernels/synthetic.h keeps every partial sum of those exact).
Status PipelineStep::unit_backward(int u, int microbatch, void* grad, bool accumulate) {
  const Unit& unit = flat_.units[size_t(u)];
  const int chunk = chunk_of(u);
  TraceScope span(&trace_, "backward c" + std::to_string(chunk) + " mb" + std::to_string(microbatch) + " u" +
                               std::to_string(u),
                  op_args(chunk, microbatch) + ", \"unit\": " + std::to_string(u));
  if (schedule_)
    for (int l = unit.end_layer - 1; l >= unit.first_layer; --l) schedule_->compute("backward", layout_.layers[size_t(l)]);
  if (!computing()) return Status::ok();
  const int vrank = microbatch * ranks_ + rank_, vranks = config_.shape.microbatches * ranks_;
  const Bf16* w = state_->weights().as<Bf16>() + unit.offset;
  auto grads = [&](uint64_t off, uint64_t count) {
    char* to = state_->grad_at(grad, off);
    const int64_t step = state_->step();
    return accumulate ? compute_.synthetic_grad_accumulate(w + off, to, config_.grad_dtype, count, unit.offset + off,
                                                           vrank, vranks, step)
                      : compute_.synthetic_grad(w + off, to, config_.grad_dtype, count, unit.offset + off, vrank,
                                                vranks, step);
  };
  for (int l = unit.end_layer - 1; l >= unit.first_layer; --l) {
    if (layer_compute_) ZB_RETURN_IF_ERROR(layer_compute_->backward(layout_.layers[size_t(l)]));
    uint64_t off = flat_.layer_offset[size_t(l)] - unit.offset;
    uint64_t end = l + 1 < unit.end_layer ? flat_.layer_offset[size_t(l) + 1] - unit.offset : unit.params;
    ZB_RETURN_IF_ERROR(grads(off, end - off));
  }
  if (unit.padded > unit.params) ZB_RETURN_IF_ERROR(grads(unit.params, unit.padded - unit.params));
  return state_->plant_fault(grad);  // the first gradient of step 1, when asked
}

int PipelineStep::chunk_of(int unit) const {
  int chunk = 0;
  while (layout_.chunk_units[size_t(chunk)].second <= unit) ++chunk;
  return chunk;
}

// What the next collective moves, for the trace; micro-batch -1 for the weights' gathers.
void PipelineStep::label(int unit, int microbatch) {
  if (!trace_.enabled()) return;
  log_labels_.resize(comm_.traffic().size() + 1);
  log_labels_.back() = {unit, chunk_of(unit), microbatch};
}

// A bucket's gradient reduced in place: all-reduced where every rank updates everything (dp),
// else reduce-scattered into this rank's block of it.
Status PipelineStep::reduce(int u, int microbatch, void* grad) {
  if (!communicating()) return Status::ok();
  const Unit& unit = flat_.units[size_t(u)];
  label(u, microbatch);
  const DType gd = config_.grad_dtype;
  if (model_.all_reduces()) return comm_.all_reduce(grad, grad, unit.padded, gd);
  const uint64_t block = flat_.block(unit);
  return comm_.reduce_scatter(grad, state_->grad_at(grad, uint64_t(rank_) * block), block, gd);
}

// The oldest reduced block goes into the shard: copied for a bucket's first micro-batch,
// added for the others (in issue order, so a bucket's micro-batches arrive in order).
Status PipelineStep::add_oldest_pending() {
  const Pending p = pending_.front();
  pending_.pop_front();
  if (!computing()) return Status::ok();
  const Unit& unit = flat_.units[size_t(p.unit)];
  const uint64_t block = flat_.block(unit);
  const void* src = state_->grad_at(state_->slot(size_t(p.slot)).data(), uint64_t(rank_) * block);
  void* dst = state_->grad_at(state_->grads().data(), flat_.shard_offset(unit));
  if (p.microbatch == 0) return compute_.copy(dst, src, block * dtype_size(config_.grad_dtype));
  return compute_.accumulate(dst, src, config_.grad_dtype, block);
}

// Compute waits for the reductions still in flight (z2: the last two slots, each added into
// the shard), the host too, bounded by the timeout; then each bucket's own part is updated and
// its weights gathered at once (z1, z2); the next step's forward waits for them chunk by chunk.
Status PipelineStep::optimizer() {
  if (model_.shards_grads()) {
    while (!pending_.empty()) {
      ZB_RETURN_IF_ERROR(waits_.after(slot_free_[pending_.front().slot]));
      ZB_RETURN_IF_ERROR(add_oldest_pending());
    }
  } else {
    Event reduced;
    ZB_RETURN_IF_ERROR(comm_.record(&reduced));
    ZB_RETURN_IF_ERROR(waits_.after(reduced));
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  for (size_t i = 0; i < flat_.units.size(); ++i) {
    if (schedule_) schedule_->compute("update", int(i));
    if (computing()) ZB_RETURN_IF_ERROR(update_unit(i));
    if (model_.all_gathers() == 0 || !communicating()) continue;
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // it sends the updated block
    ZB_RETURN_IF_ERROR(gather_unit(i));
  }
  return compute_.synchronize();
}

Status PipelineStep::gather_unit(size_t i) {
  const Unit& u = flat_.units[i];
  label(int(i), -1);
  Bf16* w = state_->weights().as<Bf16>();
  const uint64_t block = flat_.block(u);
  ZB_RETURN_IF_ERROR(comm_.all_gather(w + u.offset + uint64_t(rank_) * block, w + u.offset, block, DType::bf16));
  return comm_.record(&weights_ready_[i]);
}

// What this rank owns of a bucket, updated as the state keeps it (StageState::update). The
// reduced gradient is a sum over ranks and micro-batches; the kernel averages it with its scale.
Status PipelineStep::update_unit(size_t i) {
  TraceScope span(&trace_, "optimizer u" + std::to_string(i), "\"unit\": " + std::to_string(i));
  return state_->update(flat_.units[i], 1.0f / float(ranks_ * config_.shape.microbatches));
}

// ---- Communication alone (the overlap figures' yardsticks), each waited for.

Status PipelineStep::reduce_chunk(int chunk) {
  const auto [first, end] = layout_.chunk_units[size_t(chunk)];
  for (int u = end - 1; u >= first; --u) {
    void* grad = model_.shards_grads() ? state_->slot(0).data()
                                       : state_->grad_at(state_->grads().data(), flat_.units[size_t(u)].offset);
    ZB_RETURN_IF_ERROR(reduce(u, config_.shape.microbatches - 1, grad));
  }
  return comm_.synchronize();
}

Status PipelineStep::gather_weights() {
  if (model_.all_gathers() == 0) return Status::ok();
  for (size_t i = 0; i < flat_.units.size(); ++i) ZB_RETURN_IF_ERROR(gather_unit(i));
  return comm_.synchronize();
}

void PipelineStep::add_comm_spans(size_t first, double origin_s, size_t end) {
  zb::add_comm_spans(
      trace_, comm_.traffic(), first, origin_s,
      [this](size_t i) {
        LogLabel l = i < log_labels_.size() ? log_labels_[i] : LogLabel();
        return "\"unit\": " + std::to_string(l.unit) + ", " + op_args(l.chunk, l.microbatch);
      },
      end);
}

}  // namespace zb
