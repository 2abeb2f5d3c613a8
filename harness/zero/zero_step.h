// ZeRO: the resident state and one training step of each stage (dp, z1, z2, z3, and the
// node-aware hsdp and hpz), issuing the real collectives on real buffers, asynchronously on
// the communicator's stream. What a stage keeps and shards, and over which group, comes from
// its StageModel (stage.h).
#pragma once

#include <memory>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/schedule_log.h"
#include "harness/compute/compute.h"
#include "harness/core/memory_tracker.h"
#include "harness/core/trace.h"
#include "harness/stage/compute_waits.h"
#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/stage/stage.h"

namespace zb {

struct ZeroConfig {
  Stage stage = Stage::dp;
  OptimizerConfig optimizer;
  DType grad_dtype = DType::bf16;
  uint64_t bucket_elems = 25ull << 20;  // gradient bucket, in parameters
  bool corrupt = false;  // test only: perturb one gradient element of the first step
  // Overlap as real systems do it (bucketed reductions in flight during backward, the
  // weight all-gather of z1/z2 overlapping the next forward, z3 prefetching `prefetch`
  // layers); off serialises every collective after the compute it follows.
  bool overlap = true;
  int prefetch = 1;
};

// What a step runs: everything, or one side alone (to time compute and communication
// separately; the state is then meaningless).
enum class StepMode { full, compute_only, comm_only };

// A run of the flat vector: `count` elements from flat index `flat`, stored from `local` in
// this rank's weight buffer and from `local_master` in its FP32 master buffer.
struct Segment {
  uint64_t flat, local, local_master, count;
};

// What the check compares: the BF16 weights, and the FP32 master weights, which show an
// update too small to move a BF16 weight (Adam's steps are ~lr, below BF16's resolution).
struct CheckState {
  std::vector<Bf16> weights;
  std::vector<float> master;
};

class ZeroStep {
 public:
  // Allocates the stage's resident state through the tracker, measures it independently
  // (resident-set growth or cudaMemGetInfo), then allocates transient buffers and
  // initialises the weights identically on every rank.
  static Status create(Communicator& comm, Compute& compute, const ModelSpec& model,
                       const ZeroConfig& config, std::unique_ptr<ZeroStep>* out);

  Status step();  // one training step: forward, backward, optimizer
  Status finish();  // waits for collectives still in flight (z1/z2's weight all-gathers)
  int64_t steps_done() const { return step_; }

  // The optimizer step by itself, as zb_optimizer times it, part by part, from every rank's
  // full local gradient (the point where backward would end without reducing during it):
  Status begin_step() { return ++step_, Status::ok(); }
  // this rank's gradient of every element from the weights it sees (z3 gathers them first);
  Status local_gradient(void* full_grad);
  // the reduction, out of place into the stage's gradient state, and waited for;
  Status reduce_gradient(const void* full_grad);
  // the update of what this rank owns, without gathering;
  Status update_owned();
  // the gather of the updated weights where the stage holds them whole (z1, z2), waited for.
  Status gather_updated();
  // Initial weights, zero moments, step 0: the start of a replay for the check.
  Status reset();
  // How long the last step's compute stood waiting for communication: its exposed
  // communication, measured directly (see compute_after).
  double last_exposed_s() const { return exposed_s_; }
  void set_mode(StepMode mode) { mode_ = mode; }
  void set_layer_compute(LayerCompute* lc) { layer_compute_ = lc; }
  // Logs each step's compute (forward and backward per layer, the update per unit) in program
  // order, beside the collectives a recording communicator logs (zb_predict).
  void set_schedule_log(ScheduleLog* log) { schedule_ = log; }
  // Spans of the steps while tracing is on: compute scopes, waits of compute for
  // communication (host-timed ones), and every collective from the traffic log labelled with
  // the unit it moved and when it was issued (microseconds after `origin_s`).
  Trace& trace() { return trace_; }
  void add_comm_spans(size_t first_log_index, double origin_s);

  const FlatLayout& layout() const { return layout_; }
  const MemoryTracker& tracker() const { return tracker_; }
  int64_t measured_state_bytes() const { return measured_state_bytes_; }

  // The parts of the final weights this rank verifies: its own block of every unit for the
  // sharded stages, a 1/N slice for dp, so the ranks together cover every element once.
  std::vector<Segment> check_segments() const;
  Status state_to_host(const std::vector<Segment>& segments, CheckState* out) const;

 private:
  ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config, FlatLayout layout);
  Status allocate_state();
  Status init_weights();
  Status update_unit(size_t unit);
  // The collectives, skipped in compute-only mode, awaited at once without overlap.
  Status reduce(const Unit& u, int unit, const void* grad_src);
  Status gather(int unit, Bf16* into, Event* done, bool backward = false);
  Status issue_gathers(size_t pos);
  Status keep_node_copy(size_t pos, const Bf16* gathered);
  Status forward();
  Status backward();
  Status optimizer();
  Status gathered_weights(size_t pos, Bf16** weights);
  uint64_t owned_flat(const Unit& u) const;
  uint64_t owned_count(const Unit& u) const;
  uint64_t state_offset(const Unit& u) const;
  uint64_t grad_offset(const Unit& u) const;
  uint64_t weight_offset(const Unit& u) const;
  Status compute_after(const Event& e);
  Status layer_backward(const Unit& u, int layer, const Bf16* weights, void* grad);
  Status padding_grad(const Unit& u, const Bf16* weights, void* grad);
  Status maybe_corrupt(void* grad);
  char* grad_at(void* base, uint64_t elems) const;
  bool computing() const { return mode_ != StepMode::comm_only; }

  Communicator& comm_;
  Compute& compute_;
  ZeroConfig config_;
  const StageModel& model_;
  FlatLayout layout_;
  MemoryTracker tracker_;
  int rank_, ranks_;                 // in the world: whose gradient, summed over how many
  int shard_rank_;                   // in the group the stage shards over (the layout's ranks)
  int node_rank_, node_ranks_;       // on this rank's node (hpz's node copy)
  int replica_, replicas_;           // copies of the shards across nodes (hsdp), this one's index
  int64_t step_ = 0, measured_state_bytes_ = 0;
  uint64_t max_unit_ = 0;
  Buffer weights_, grads_, master_, m_, v_;
  Buffer node_weights_;              // hpz: the weights sharded over the node, for backward
  Buffer slot_[2];                   // transient: a bucket's or layer's full gradients
  std::vector<Buffer> gathered_;     // transient (sharded weights): prefetch + 1 gathered units
  Event slot_free_[2];
  double exposed_s_ = 0;
  std::vector<Event> gathered_ready_, weights_ready_;  // per gathered buffer; per unit
  size_t issued_pos_ = 0;            // sharded weights: gathers issued this step (fwd, bwd)
  size_t copies_done_ = 0;           // hpz: forward positions whose node copy is cut
  StepMode mode_ = StepMode::full;
  LayerCompute* layer_compute_ = nullptr;
  ScheduleLog* schedule_ = nullptr;
  Trace trace_;
  ComputeWaits waits_;               // compute's waits for communication: exposed time
  std::vector<int> log_unit_;        // traffic log index -> unit, for the trace
};

// The single-process reference: replays `steps` steps for `segments` of the flat vector,
// summing each step's gradients over all `ranks` itself, and returns the final state.
Status reference_state(const ZeroConfig& config, int ranks, int64_t steps,
                       const std::vector<Segment>& segments, Compute& compute, CheckState* out);
// Elements whose weight or master differs from the reference in any bit.
uint64_t count_mismatches(const CheckState& got, const CheckState& want);
// What a rank holds of `segments`, from its BF16 weight and FP32 master buffers (wherever
// they live), for count_mismatches: every step schedule's state_to_host.
Status copy_state_to_host(const Buffer& weights, const Buffer& master, const std::vector<Segment>& segments,
                          CheckState* out);

}  // namespace zb
