// Gradients out through S device slots: the backward of M micro-batches chunk by chunk, each
// chunk's gradient reduce-scattered in its slot and its own block copied out and added into the
// host shard on the copy engine; then the optimizer on the host shard (or back on the device)
// and the all-gather of the updated weights.
#include <algorithm>
#include <cmath>
#include <string>

#include "harness/core/clock.h"
#include "harness/offload/offload.h"
#include "harness/pipeline/pipeline_layout.h"
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
  // ZeRO-2's state: whole weights on the device, the gradient shard on the host.
  StageConfig stage;
  stage.stage = Stage::z2;
  stage.optimizer = config.optimizer;
  stage.grad_dtype = config.grad_dtype;
  stage.corrupt = config.corrupt;
  Placement where;
  where.grads_on_host = true;
  where.optimizer_on_host = config.optimizer_on_host;
  where.host_threads = config.host_threads;
  where.slots = config.slots;
  std::unique_ptr<StageState> state;
  ZB_RETURN_IF_ERROR(StageState::create(comm, compute, stage, std::move(lay.flat), where, &state));
  auto g = std::unique_ptr<OffloadGrads>(new OffloadGrads(comm, compute, config, std::move(state)));
  ZB_RETURN_IF_ERROR(CopyEngine::create(compute.kind(), &g->engine_));
  // Each reduce-scatter's start and end, for the time the offload path was busy (the MPI
  // backend's communication thread reads the clock; NCCL's leaves them unset).
  comm.set_record_times(true);
  ZB_RETURN_IF_ERROR(g->allocate_staging());
  *out = std::move(g);
  return Status::ok();
}

// With more than one micro-batch a copied block lands in a host staging block before it is
// added into the shard: host memory, measured with the state's host side.
Status OffloadGrads::allocate_staging() {
  const size_t S = size_t(config_.slots);
  staging_.resize(S);
  slot_free_.assign(S, 0);
  slot_reduced_.assign(S, Event());
  if (config_.microbatches == 1) return Status::ok();
  const uint64_t bytes = state_->max_unit() / uint64_t(ranks_) * dtype_size(config_.grad_dtype);
  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &before));
  for (Buffer& b : staging_)
    ZB_RETURN_IF_ERROR(state_->host_tracker().allocate(MemCategory::transient, bytes, &b));
  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &after));
  measured_staging_ = after - before;
  return Status::ok();
}

static std::string fill_args(int fill, int slot, int chunk, int microbatch) {
  return "\"fill\": " + std::to_string(fill) + ", \"slot\": " + std::to_string(slot) + ", \"chunk\": " +
         std::to_string(chunk) + ", \"microbatch\": " + std::to_string(microbatch);
}

Status OffloadGrads::step() {
  state_->begin_step();
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
  char* slot = state_->slot(size_t(s)).as<char>();
  const std::string args = fill_args(fill, s, chunk, microbatch);
  {
    TraceScope span(&trace_, "backward c" + std::to_string(chunk) + " mb" + std::to_string(microbatch), args);
    if (chunk_compute_) ZB_RETURN_IF_ERROR(chunk_compute_->forward(0));
    const int vrank = microbatch * ranks_ + rank_, vranks = config_.microbatches * ranks_;
    ZB_RETURN_IF_ERROR(compute_.synthetic_grad(state_->weights().as<Bf16>() + u.offset, slot, gd, u.padded, u.offset,
                                               vrank, vranks, state_->step()));
    ZB_RETURN_IF_ERROR(state_->plant_fault(slot));  // the first gradient of step 1, when asked
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
  char* dst = state_->grad_at(state_->grads().data(), layout_.shard_offset(u));
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
  Bf16* w = state_->weights().as<Bf16>();
  std::vector<CopyEngine::Ticket> copied;
  {
    TraceScope span(&trace_, "optimizer (host)");
    for (const Unit& u : layout_.units) {
      ZB_RETURN_IF_ERROR(state_->update(u, scale));
      copied.push_back(engine_->copy(w + layout_.own_offset(u, rank_),
                                     state_->own_weights().as<Bf16>() + layout_.shard_offset(u),
                                     layout_.block(u) * 2, CopyDir::h2d, "h2d weights"));
    }
  }
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    ZB_RETURN_IF_ERROR(engine_->wait(copied[i]));
    ZB_RETURN_IF_ERROR(comm_.all_gather(w + layout_.own_offset(u, rank_), w + u.offset, layout_.block(u), DType::bf16));
  }
  return comm_.synchronize();
}

// The host shard comes back to the device block by block through the slots, and the device
// kernel updates the device's optimizer state.
Status OffloadGrads::optimizer_on_device() {
  const float scale = 1.0f / float(ranks_ * config_.microbatches);
  const size_t g = dtype_size(config_.grad_dtype);
  Bf16* w = state_->weights().as<Bf16>();
  for (size_t i = 0; i < layout_.units.size(); ++i) {
    const Unit& u = layout_.units[i];
    const uint64_t block = layout_.block(u);
    const Buffer& slot = state_->slot(i % state_->slots());
    const char* shard = state_->grad_at(state_->grads().data(), layout_.shard_offset(u));
    ZB_RETURN_IF_ERROR(engine_->after_compute(compute_.stream()));  // an earlier update may still read it
    ZB_RETURN_IF_ERROR(engine_->wait(engine_->copy(slot.data(), shard, block * g, CopyDir::h2d, "h2d grads")));
    TraceScope span(&trace_, "optimizer u" + std::to_string(i));
    ZB_RETURN_IF_ERROR(state_->update(u, scale, slot.data()));
    ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
    ZB_RETURN_IF_ERROR(comm_.all_gather(w + layout_.own_offset(u, rank_), w + u.offset, block, DType::bf16));
  }
  ZB_RETURN_IF_ERROR(comm_.synchronize());
  return compute_.synchronize();
}

uint64_t OffloadGrads::largest_block() const { return state_->max_unit() / uint64_t(ranks_); }

Status OffloadGrads::reduce_alone() {
  char* slot = state_->slot(0).as<char>();
  const uint64_t block = largest_block();
  ZB_RETURN_IF_ERROR(comm_.reduce_scatter(slot, state_->grad_at(slot, uint64_t(rank_) * block), block,
                                          config_.grad_dtype));
  return comm_.synchronize();
}

Status OffloadGrads::copy_alone() {
  const size_t bytes = largest_block() * dtype_size(config_.grad_dtype);
  void* dst = staging_[0].data() ? staging_[0].data() : state_->grads().data();
  return engine_->wait(engine_->copy(dst, state_->slot(0).data(), bytes, CopyDir::d2h));
}

Status OffloadGrads::accumulate_alone() {
  const uint64_t block = largest_block();
  const DType gd = config_.grad_dtype;
  void* dst = state_->grads().data();
  void* src = staging_[0].data() ? staging_[0].data() : dst;
  const int threads = config_.host_threads;
  if (src == dst) return Status::ok();  // one micro-batch: nothing is ever added
  return engine_->wait(engine_->host([=] {
    accumulate_cpu_threads(dst, src, gd, block, threads);
    return Status::ok();
  }));
}

}  // namespace zb
