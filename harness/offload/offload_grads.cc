// Gradients out through S device slots: the backward of M micro-batches chunk by chunk, each
// chunk's gradient reduce-scattered in its slot and its own block copied out and added into the
// host shard on the copy engine; then the optimizer on the host shard (or back on the device)
// and the all-gather of the updated weights.
#include <algorithm>
#include <cmath>
#include <string>

#include "harness/core/clock.h"
#include "harness/offload/offload.h"
#include "harness/pipeline/pipeline_step.h"
#include "kernels/accumulate.h"

namespace zb {

Status OffloadGrads::create(Communicator& comm, Compute& compute, const ModelSpec& model, const OffloadConfig& config,
                            std::unique_ptr<OffloadGrads>* out) {
  if (config.slots < 1) return Status::error("offload needs at least one slot");
  PipelineShape shape{config.microbatches, config.chunks, 1, 0};
  ZB_RETURN_IF_ERROR(check_pipeline(shape));
  if (int(model.layers.size()) < config.chunks)
    return Status::error("the model has " + std::to_string(model.layers.size()) + " layers, fewer than --chunks=" +
                         std::to_string(config.chunks) + "; give it more layers or fewer chunks");
  PipelineLayout lay;
  // A bucket larger than any chunk: one unit per chunk, padded to a multiple of N.
  ZB_RETURN_IF_ERROR(make_pipeline_layout(model, shape, uint64_t(1) << 62, comm.size(), comm.size(), &lay));
  auto g = std::unique_ptr<OffloadGrads>(new OffloadGrads(comm, compute, config));
  g->layout_ = std::move(lay.flat);
  for (const Unit& u : g->layout_.units) g->max_unit_ = std::max(g->max_unit_, u.padded);
  ZB_RETURN_IF_ERROR(Compute::create(MemKind::host, config.host_threads, &g->host_compute_));
  ZB_RETURN_IF_ERROR(CopyEngine::create(compute.kind(), &g->engine_));
  // Each reduce-scatter's start and end, for the time the offload path was busy (the MPI
  // backend's communication thread reads the clock; NCCL's leaves them unset).
  comm.set_record_times(true);
  ZB_RETURN_IF_ERROR(g->allocate());
  ZB_RETURN_IF_ERROR(g->init_weights());
  *out = std::move(g);
  return Status::ok();
}

// The slots alone are what the offload leaves of the gradients on the device: measured by
// themselves. The host side (shard, staging blocks, and the optimizer state when it runs
// there) is measured by the resident set, pinned pages included.
Status OffloadGrads::allocate() {
  const size_t g = dtype_size(config_.grad_dtype);
  const uint64_t shard = layout_.shard(), block = max_unit_ / uint64_t(ranks_);
  const int S = config_.slots;
  ZB_RETURN_IF_ERROR(device_tracker_.allocate(MemCategory::weights, layout_.padded * 2, &weights_));
  if (!config_.optimizer_on_host) {
    ZB_RETURN_IF_ERROR(device_tracker_.allocate(MemCategory::master, shard * 4, &master_));
    ZB_RETURN_IF_ERROR(device_tracker_.allocate(MemCategory::moments, shard * 4, &m_));
    if (config_.optimizer.kind == Optimizer::adam)
      ZB_RETURN_IF_ERROR(device_tracker_.allocate(MemCategory::moments, shard * 4, &v_));
  }
  slot_bytes_ = max_unit_ * g;
  slot_.resize(size_t(S));
  slot_free_.assign(size_t(S), 0);
  slot_reduced_.assign(size_t(S), Event());
  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(compute_.kind(), &before));
  for (Buffer& b : slot_) ZB_RETURN_IF_ERROR(device_tracker_.allocate(MemCategory::grads, slot_bytes_, &b));
  ZB_RETURN_IF_ERROR(used_memory_bytes(compute_.kind(), &after));
  measured_device_ = after - before;

  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &before));
  ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::grads, shard * g, &shard_));
  staging_.resize(size_t(S));
  if (config_.microbatches > 1)
    for (Buffer& b : staging_) ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::transient, block * g, &b));
  if (config_.optimizer_on_host) {
    ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::master, shard * 4, &master_));
    ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::moments, shard * 4, &m_));
    if (config_.optimizer.kind == Optimizer::adam)
      ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::moments, shard * 4, &v_));
    ZB_RETURN_IF_ERROR(host_tracker_.allocate(MemCategory::weights, shard * 2, &own_weights_));
  }
  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &after));
  measured_host_ = after - before;
  return Status::ok();
}

// zb_zero's initial values: whole BF16 weights everywhere, the FP32 master of this rank's
// block of every unit, on whichever engine runs the optimizer.
Status OffloadGrads::init_weights() {
  Compute& opt = optimizer_compute();
  Buffer scratch_master, scratch_w;
  ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), max_unit_ * 4, &scratch_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(opt.kind(), max_unit_ * 2, &scratch_w));
  for (const Unit& u : layout_.units) {
    ZB_RETURN_IF_ERROR(compute_.init_weights(scratch_master.as<float>(), weights_.as<Bf16>() + u.offset, u.padded, u.offset));
    ZB_RETURN_IF_ERROR(opt.init_weights(master_.as<float>() + layout_.shard_offset(u), scratch_w.as<Bf16>(),
                                        layout_.block(u), layout_.own_offset(u, rank_)));
  }
  ZB_RETURN_IF_ERROR(opt.synchronize());
  return compute_.synchronize();
}

static std::string fill_args(int fill, int slot, int chunk, int microbatch) {
  return "\"fill\": " + std::to_string(fill) + ", \"slot\": " + std::to_string(slot) + ", \"chunk\": " +
         std::to_string(chunk) + ", \"microbatch\": " + std::to_string(microbatch);
}

Status OffloadGrads::step() {
  ++step_;
  times_ = OffloadTimes();
  engine_->take_stats();
  const size_t first_collective = comm_.traffic().size();
  int fill = 0;
  for (int m = 0; m < config_.microbatches; ++m)
    for (int c = config_.chunks - 1; c >= 0; --c) ZB_RETURN_IF_ERROR(backward_chunk(c, m, fill++));
  // What the backward did not hide: the last fills' reductions, copies and adds.
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  const double t0 = now_seconds();
  ZB_RETURN_IF_ERROR(engine_->synchronize());
  const double t1 = now_seconds();
  times_.tail_s = t1 - t0;
  trace_.add({"wait copies", Track::wait, t0, t1, ""});
  const std::vector<CollRecord> log = comm_.traffic().records();
  for (size_t i = first_collective; i < log.size(); ++i)
    if (log[i].op == Coll::reduce_scatter) times_.reduce_s += log[i].start_s < 0 ? NAN : log[i].end_s - log[i].start_s;
  corrupted_ = false;
  ZB_RETURN_IF_ERROR(config_.optimizer_on_host ? optimizer_on_host() : optimizer_on_device());
  times_.copies = engine_->take_stats();
  return Status::ok();
}

// Compute waits for the slot's last fill to be reduced, then copied out: two waits, timed
// apart, so the copies' exposure is not the reduction's. The engine is drained first, so each
// wait is time the compute engine stands idle (on a CPU, compute is done when its call returns).
Status OffloadGrads::wait_slot(int slot) {
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  const std::string args = "\"slot\": " + std::to_string(slot);
  const double t0 = now_seconds();
  ZB_RETURN_IF_ERROR(comm_.wait(slot_reduced_[size_t(slot)]));
  const double t1 = now_seconds();
  ZB_RETURN_IF_ERROR(engine_->wait(slot_free_[size_t(slot)]));
  const double t2 = now_seconds();
  times_.exposed_comm_s += t1 - t0;
  times_.exposed_s += t2 - t1;
  trace_.add({"wait reduce " + std::to_string(slot), Track::wait, t0, t1, args});
  trace_.add({"wait slot " + std::to_string(slot), Track::wait, t1, t2, args});
  return Status::ok();
}

// Fill `fill` of the step: chunk `chunk`'s gradient of micro-batch `microbatch` into slot
// fill % S; micro-batch m of rank r contributes as rank m * N + r of M * N would, so the
// reference's exact sums apply (kernels/synthetic.h).
Status OffloadGrads::backward_chunk(int chunk, int microbatch, int fill) {
  const int s = fill % config_.slots;
  ZB_RETURN_IF_ERROR(wait_slot(s));
  const Unit& u = layout_.units[size_t(chunk)];
  const uint64_t block = layout_.block(u);
  const DType gd = config_.grad_dtype;
  const size_t g = dtype_size(gd);
  char* slot = slot_[size_t(s)].as<char>();
  const std::string args = fill_args(fill, s, chunk, microbatch);
  {
    TraceScope span(&trace_, "backward c" + std::to_string(chunk) + " mb" + std::to_string(microbatch), args);
    if (chunk_compute_) ZB_RETURN_IF_ERROR(chunk_compute_->forward(0));
    const int vrank = microbatch * ranks_ + rank_, vranks = config_.microbatches * ranks_;
    ZB_RETURN_IF_ERROR(compute_.synthetic_grad(weights_.as<Bf16>() + u.offset, slot, gd, u.padded, u.offset, vrank,
                                               vranks, step_));
    if (config_.corrupt && step_ == 1 && !corrupted_) {
      corrupted_ = true;
      const float one = 1.0f;
      const Bf16 one_bf16 = float_to_bf16(one);
      ZB_RETURN_IF_ERROR(compute_.copy(slot, gd == DType::bf16 ? static_cast<const void*>(&one_bf16) : &one, g));
    }
  }
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  char* own = slot + uint64_t(rank_) * block * g;
  ZB_RETURN_IF_ERROR(comm_.reduce_scatter(slot, own, block, gd));
  Event& reduced = slot_reduced_[size_t(s)];
  ZB_RETURN_IF_ERROR(comm_.record(&reduced));
  // The copy-out waits for the reduce-scatter: on a GPU on the device, through the engine's
  // relay stream (a communicator is driven from one thread only); on CPU the engine's thread
  // waits for the communication thread.
  if (compute_.kind() == MemKind::device) {
    ZB_RETURN_IF_ERROR(
        engine_->after_stream([this, reduced](void* relay) { return comm_.compute_waits_for(reduced, relay); }));
  } else {
    engine_->wait_for([this, reduced] { return comm_.wait(reduced); });
  }
  char* dst = at(shard_, layout_.shard_offset(u));
  const std::string what = " c" + std::to_string(chunk) + " mb" + std::to_string(microbatch);
  if (microbatch == 0) {  // the first micro-batch's block is the shard's first value
    slot_free_[size_t(s)] = engine_->copy(dst, own, block * g, CopyDir::d2h, "d2h" + what, args);
    return Status::ok();
  }
  void* staged = staging_[size_t(s)].data();
  slot_free_[size_t(s)] = engine_->copy(staged, own, block * g, CopyDir::d2h, "d2h" + what, args);
  const int threads = config_.host_threads;
  engine_->host([dst, staged, gd, block, threads] {
    accumulate_cpu_threads(dst, staged, gd, block, threads);
    return Status::ok();
  }, "add" + what, args);
  return Status::ok();
}

// The CPU kernel updates the host shard unit by unit; each updated BF16 block goes back to the
// device on the copy engine and is all-gathered once it is there.
Status OffloadGrads::optimizer_on_host() {
  const float scale = 1.0f / float(ranks_ * config_.microbatches);
  std::vector<CopyEngine::Ticket> copied;
  {
    TraceScope span(&trace_, "optimizer (host)");
    for (const Unit& u : layout_.units) {
      const uint64_t so = layout_.shard_offset(u), block = layout_.block(u);
      ZB_RETURN_IF_ERROR(host_compute_->update(config_.optimizer, at(shard_, so), config_.grad_dtype,
                                               master_.as<float>() + so, m_.as<float>() + so,
                                               v_.data() ? v_.as<float>() + so : nullptr, own_weights_.as<Bf16>() + so,
                                               block, step_, scale));
      copied.push_back(engine_->copy(weights_.as<Bf16>() + layout_.own_offset(u, rank_), own_weights_.as<Bf16>() + so,
                                     block * 2, CopyDir::h2d, "h2d weights"));
    }
  }
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    ZB_RETURN_IF_ERROR(engine_->wait(copied[i]));
    Bf16* w = weights_.as<Bf16>();
    ZB_RETURN_IF_ERROR(comm_.all_gather(w + layout_.own_offset(u, rank_), w + u.offset, layout_.block(u), DType::bf16));
  }
  return comm_.synchronize();
}

// The host shard comes back to the device block by block through the slots, and the device
// kernel updates the device's optimizer state.
Status OffloadGrads::optimizer_on_device() {
  const float scale = 1.0f / float(ranks_ * config_.microbatches);
  const DType gd = config_.grad_dtype;
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    const uint64_t so = layout_.shard_offset(u), block = layout_.block(u);
    Buffer& slot = slot_[i % slot_.size()];
    ZB_RETURN_IF_ERROR(engine_->after_compute(compute_.stream()));  // an earlier update may still read it
    ZB_RETURN_IF_ERROR(engine_->wait(engine_->copy(slot.data(), at(shard_, so), block * dtype_size(gd), CopyDir::h2d,
                                                   "h2d grads")));
    TraceScope span(&trace_, "optimizer u" + std::to_string(i));
    ZB_RETURN_IF_ERROR(compute_.update(config_.optimizer, slot.data(), gd, master_.as<float>() + so,
                                       m_.as<float>() + so, v_.data() ? v_.as<float>() + so : nullptr,
                                       weights_.as<Bf16>() + layout_.own_offset(u, rank_), block, step_, scale));
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
    Bf16* w = weights_.as<Bf16>();
    ZB_RETURN_IF_ERROR(comm_.all_gather(w + layout_.own_offset(u, rank_), w + u.offset, block, DType::bf16));
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  return compute_.synchronize();
}

uint64_t OffloadGrads::largest_block() const { return max_unit_ / uint64_t(ranks_); }

Status OffloadGrads::reduce_alone() {
  char* slot = slot_[0].as<char>();
  const uint64_t block = largest_block();
  ZB_RETURN_IF_ERROR(comm_.reduce_scatter(slot, slot + uint64_t(rank_) * block * dtype_size(config_.grad_dtype), block,
                                          config_.grad_dtype));
  return comm_.synchronize();
}

Status OffloadGrads::copy_alone() {
  const size_t bytes = largest_block() * dtype_size(config_.grad_dtype);
  void* dst = staging_[0].data() ? staging_[0].data() : shard_.data();
  return engine_->wait(engine_->copy(dst, slot_[0].data(), bytes, CopyDir::d2h));
}

Status OffloadGrads::accumulate_alone() {
  const uint64_t block = largest_block();
  const DType gd = config_.grad_dtype;
  void* src = staging_[0].data() ? staging_[0].data() : shard_.data();
  void* dst = shard_.data();
  const int threads = config_.host_threads;
  if (src == dst) return Status::ok();  // one micro-batch: nothing is ever added
  return engine_->wait(engine_->host([=] {
    accumulate_cpu_threads(dst, src, gd, block, threads);
    return Status::ok();
  }));
}

std::vector<Segment> OffloadGrads::check_segments() const {
  std::vector<Segment> segs;
  for (const Unit& u : layout_.units) {
    const uint64_t own = layout_.own_offset(u, rank_);
    segs.push_back({own, own, layout_.shard_offset(u), layout_.block(u)});
  }
  return segs;
}

Status OffloadGrads::state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
  return copy_state_to_host(weights_, master_, segments, out);
}

}  // namespace zb
