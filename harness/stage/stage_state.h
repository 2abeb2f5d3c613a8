// A rank's resident state of one stage, built from the stage's row of the stage table: what it
// allocates (the whole padded vector or this rank's shard of it, per category, and hpz's node
// copy of the weights), where each part lives, the initial values, the optimizer's step count,
// the planted test fault, the memory it measures, and the parts of it the check compares. Each
// step schedule (the ZeRO step, the pipeline step, gradients out) holds one and adds its order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/compute/compute.h"
#include "harness/core/memory_tracker.h"
#include "harness/stage/model.h"
#include "harness/stage/reference.h"
#include "harness/stage/stage_config.h"

namespace zb {

// Where the parts live. By default everything is on the compute engine's memory, with two
// gradient slots of the largest unit where the stage shards gradients (one filling while the
// other's reduce-scatter is in flight). Offload keeps the gradient shard, and optionally the
// optimizer state with a BF16 copy of the own block, in host memory (pinned where a GPU copies),
// and S slots on the device.
struct Placement {
  bool grads_on_host = false;
  bool optimizer_on_host = false;  // only where the weights are whole and the optimizer sharded
  int host_threads = 0;            // CPU threads of the host optimizer (0: all)
  int slots = -1;                  // -1: as the stage needs
};

// The host side of a part placed there: pinned memory where a GPU copies, plain host memory on CPUs.
inline MemKind offload_host_kind(MemKind device) { return device == MemKind::device ? MemKind::pinned : MemKind::host; }

// Where this rank stands in the groups the stage uses.
struct RankPlace {
  int rank = 0, ranks = 1;            // in the world: whose gradient, summed over how many
  int shard_rank = 0;                 // in the group the stage shards over (the layout's ranks)
  int node_rank = 0, node_ranks = 1;  // on this rank's node (hpz's node copy)
  int replica = 0, replicas = 1;      // copies of the shards across nodes (hsdp), this one's index
};

class StageState {
 public:
  // Allocates every part through the trackers, measuring the memory as it goes, and (unless
  // the memory is reserved, for a schedule recorded rather than run) sets the initial values.
  static Status create(Communicator& comm, Compute& compute, const StageConfig& config, FlatLayout layout,
                       const Placement& where, std::unique_ptr<StageState>* out);

  const StageConfig& config() const { return config_; }
  const StageModel& model() const { return model_; }
  const FlatLayout& layout() const { return layout_; }
  const RankPlace& place() const { return place_; }
  uint64_t max_unit() const { return max_unit_; }

  // The parts: BF16 weights (whole or shard), hpz's node copy, gradients (whole or shard),
  // FP32 master and moments (v: Adam only), the host's BF16 own block (optimizer on host), and
  // the gradient slots.
  const Buffer& weights() const { return weights_; }
  const Buffer& node_weights() const { return node_weights_; }
  const Buffer& grads() const { return grads_; }
  const Buffer& master() const { return master_; }
  const Buffer& own_weights() const { return own_weights_; }
  size_t slots() const { return slot_.size(); }
  const Buffer& slot(size_t i) const { return slot_[i]; }
  Compute& optimizer_compute() { return host_compute_ ? *host_compute_ : compute_; }

  // Where a unit's elements that this rank updates sit: in the flat vector (its own block when
  // the optimizer is sharded, else the whole unit), in the optimizer state, in the gradients
  // and in the BF16 weights (each a shard or the full vector, as the stage keeps it).
  uint64_t owned_flat(const Unit& u) const;
  uint64_t owned_count(const Unit& u) const;
  uint64_t state_offset(const Unit& u) const;
  uint64_t grad_offset(const Unit& u) const;
  uint64_t weight_offset(const Unit& u) const;
  char* grad_at(const void* base, uint64_t elems) const;

  // The optimizer step of what this rank owns of `u`, on the engine beside the optimizer state,
  // from the gradient state (or from `grad`, a copy of its part of it). `scale` averages the
  // reduced sum.
  Status update(const Unit& u, float scale, const void* grad = nullptr);

  // The optimizer's step count: begin_step counts a step (and arms the test fault in step 1);
  // reset returns to the initial values, zero moments and step 0, the start of a replay.
  int64_t begin_step();
  int64_t step() const { return step_; }
  Status reset();
  // Test only, when configured: the first gradient written in step 1 gets one element off (its
  // first, set to 1, a value no synthetic gradient takes), once; on the compute stream, so the
  // reduction that reads it is ordered after it like any gradient write.
  Status plant_fault(void* grad);

  // The books by category, and the memory measured independently (resident-set growth, or
  // cudaMemGetInfo) around the allocations: the state on the compute engine's memory, its
  // gradients alone there (buffer and slots), and what lives on the host.
  MemoryTracker& tracker() { return tracker_; }
  const MemoryTracker& tracker() const { return tracker_; }
  MemoryTracker& host_tracker() { return host_tracker_; }
  const MemoryTracker& host_tracker() const { return host_tracker_; }
  int64_t state_bytes_measured() const { return state_measured_; }
  int64_t grad_bytes_measured() const { return grad_measured_; }
  int64_t host_bytes_measured() const { return host_measured_; }

  // The parts of the final weights this rank verifies: its own block of every unit for the
  // sharded stages (a 1/replicas part of it where nodes hold copies of the shards), a 1/N slice
  // for dp, so that the ranks together cover every element once; and those parts on the host.
  std::vector<Segment> check_segments() const;
  Status to_host(const std::vector<Segment>& segments, CheckState* out) const;

 private:
  StageState(Communicator& comm, Compute& compute, const StageConfig& config, FlatLayout layout,
             const Placement& where);
  Status allocate();
  Status init();

  Compute& compute_;
  StageConfig config_;
  const StageModel& model_;
  FlatLayout layout_;
  Placement where_;
  RankPlace place_;
  uint64_t max_unit_ = 0;
  MemoryTracker tracker_, host_tracker_;
  std::unique_ptr<Compute> host_compute_;  // the CPU engine of a host optimizer
  int64_t step_ = 0, state_measured_ = 0, grad_measured_ = 0, host_measured_ = 0;
  bool fault_armed_ = false;
  Buffer weights_, node_weights_, grads_, master_, m_, v_, own_weights_;
  std::vector<Buffer> slot_;
};

}  // namespace zb
