// Offload through device slots. Gradients out: ZeRO-2's gradient shard lives in (pinned) host
// memory and the device keeps only S chunk-sized slots; chunk k's gradient fills a slot, is
// reduce-scattered, and only this rank's block of it is copied to the host and added into the
// shard there (ZeRO-Offload's order: reduce first, offload the own partition), while the next
// chunk fills the next slot. Weights in: a model kept in pinned host memory streams into S
// layer-sized slots, one computing while the others load (FSDP's CPU offload of parameters).
#pragma once

#include <memory>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/compute/compute.h"
#include "harness/compute/copy_engine.h"
#include "harness/core/memory_tracker.h"
#include "harness/core/trace.h"
#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/stage/stage_state.h"

namespace zb {

struct OffloadConfig {
  OptimizerConfig optimizer;
  DType grad_dtype = DType::bf16;
  int microbatches = 4, chunks = 4, slots = 2;
  bool optimizer_on_host = true;  // CPU kernel on the host shard, or copied back to the device
  int host_threads = 0;           // CPU threads of the host kernels (0: all)
  bool corrupt = false;           // test only: perturb one gradient (or loaded weight) element
};

// One step's waits of compute, measured where compute waited, and what the copy engine did.
struct OffloadTimes {
  double exposed_s = 0;       // compute waited for a slot's copy-out (and add) once its reduction was done
  double exposed_comm_s = 0;  // gradients: compute waited for a slot's reduce-scatter
  double tail_s = 0;     // gradients: waited for the last copies and adds before the optimizer
  double head_s = 0;     // weights: waited for the first layer's load, which nothing can hide
  double reduce_s = 0;   // gradients: the step's reduce-scatters, as the backend timed them (NaN: untimed)
  CopyStats copies;
};

class OffloadGrads {
 public:
  // One unit per chunk (chunks split the layers as evenly as whole layers allow), padded so
  // every rank owns an equal block. Slots and host memory are measured as they are allocated.
  static Status create(Communicator& comm, Compute& compute, const ModelSpec& model, const OffloadConfig& config,
                       std::unique_ptr<OffloadGrads>* out);
  void set_chunk_compute(LayerCompute* lc) { chunk_compute_ = lc; }

  // M micro-batches of backward, chunk by chunk from the last, each through the next slot;
  // then the optimizer on the host shard (or on the device) and the weights' all-gather.
  Status step();
  const OffloadTimes& last() const { return times_; }
  int64_t steps_done() const { return state_->step(); }

  // Each alone and waited for, on the largest chunk (the yardsticks of the hide condition).
  // They overwrite the gradients: run them after the check.
  Status reduce_alone();
  Status copy_alone();
  Status accumulate_alone();
  uint64_t largest_block() const;

  const StageState& state() const { return *state_; }
  const FlatLayout& layout() const { return state_->layout(); }
  uint64_t slot_bytes() const { return state_->max_unit() * dtype_size(config_.grad_dtype); }
  // The slots, measured alone: what the offload leaves of the gradients on the device.
  int64_t measured_device_bytes() const { return state_->grad_bytes_measured(); }
  int64_t measured_host_bytes() const { return state_->host_bytes_measured() + measured_staging_; }
  double host_state_bytes() const {
    const MemoryTracker& host = state_->host_tracker();
    return double(host.resident_state_bytes() + host.bytes(MemCategory::transient));
  }
  Compute& optimizer_compute() { return state_->optimizer_compute(); }
  CopyEngine& engine() { return *engine_; }
  Trace& trace() { return trace_; }

  std::vector<Segment> check_segments() const { return state_->check_segments(); }
  Status state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
    return state_->to_host(segments, out);
  }

 private:
  OffloadGrads(Communicator& comm, Compute& compute, const OffloadConfig& config, std::unique_ptr<StageState> state)
      : comm_(comm), compute_(compute), config_(config), state_(std::move(state)), layout_(state_->layout()),
        rank_(state_->place().shard_rank), ranks_(state_->place().ranks) {}
  Status allocate_staging();
  Status wait_slot(int slot);
  Status backward_chunk(int chunk, int microbatch, int fill);
  Status optimizer_on_host();
  Status optimizer_on_device();

  Communicator& comm_;
  Compute& compute_;
  OffloadConfig config_;
  // z2's state with the gradient shard (and the optimizer state, when it runs there) on the
  // host, and S slots of the largest chunk on the device.
  std::unique_ptr<StageState> state_;
  const FlatLayout& layout_;  // the state's: one unit per chunk
  int rank_, ranks_;
  int64_t measured_staging_ = 0;
  std::vector<Buffer> staging_;                // host blocks a copy lands in before its add
  std::vector<CopyEngine::Ticket> slot_free_;  // per slot: the copy of its last fill
  std::vector<Event> slot_reduced_;            // per slot: the reduce-scatter of its last fill
  OffloadTimes times_;
  LayerCompute* chunk_compute_ = nullptr;
  Trace trace_;
  // Last, so it is destroyed first: its thread finishes the jobs still queued on the buffers.
  std::unique_ptr<CopyEngine> engine_;
};

class OffloadWeights {
 public:
  // The model's BF16 weights in pinned host memory (initialised as zb_zero's are), and S
  // slots of the largest layer on the device, both measured.
  static Status create(Compute& compute, const ModelSpec& model, int slots, bool corrupt,
                       std::unique_ptr<OffloadWeights>* out);
  void set_layer_compute(LayerCompute* lc) { layer_compute_ = lc; }
  // Every layer once: compute waits for its slot's load, computes, and frees the slot for the
  // layer S ahead. `check`: each slot is compared with the host copy it came from.
  Status step(bool check = false);
  const OffloadTimes& last() const { return times_; }
  uint64_t last_mismatches() const { return mismatches_; }
  Status copy_alone();  // the largest layer's load, waited for

  uint64_t params() const { return offsets_.back(); }
  uint64_t slot_bytes() const { return slot_bytes_; }
  int64_t measured_device_bytes() const { return measured_device_; }
  int64_t measured_host_bytes() const { return measured_host_; }
  CopyEngine& engine() { return *engine_; }
  Trace& trace() { return trace_; }

 private:
  OffloadWeights(Compute& compute, int slots, bool corrupt) : compute_(compute), slots_(slots), corrupt_(corrupt) {}
  CopyEngine::Ticket load(int layer);
  Status check_layer(int layer);

  Compute& compute_;
  int slots_;
  bool corrupt_;
  std::vector<uint64_t> offsets_;  // layer l: [offsets_[l], offsets_[l + 1])
  Buffer host_weights_;
  std::vector<Buffer> slot_;
  std::unique_ptr<CopyEngine> engine_;
  uint64_t slot_bytes_ = 0, mismatches_ = 0;
  int64_t measured_device_ = 0, measured_host_ = 0;
  OffloadTimes times_;
  LayerCompute* layer_compute_ = nullptr;
  Trace trace_;
};

}  // namespace zb
