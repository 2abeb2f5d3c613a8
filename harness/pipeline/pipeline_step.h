// Pipeline ZeRO: one data-parallel rank that is one pipeline stage of its replica runs a step of
// M micro-batches over its C model chunks in its pipeline schedule, under dp, z1 (Megatron's
// distributed optimizer) or z2 (pipeline ZeRO-2), on real buffers with real optimizer updates.
// What each strategy shards comes from its row of the stage table; what the pipeline adds is
// when gradients are reduced (pipeline_formula.h).
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/schedule_log.h"
#include "harness/compute/compute.h"
#include "harness/core/trace.h"
#include "harness/pipeline/pipeline_layout.h"
#include "harness/pipeline/pipeline_schedule.h"
#include "harness/stage/compute_waits.h"
#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/stage/stage_state.h"

namespace zb {

// The stage is dp, z1 or z2 (is_pipeline_stage).
struct PipelineConfig : StageConfig {
  PipelineConfig() { stage = Stage::z2; }
  uint64_t bucket_elems = 25ull << 20;  // gradient bucket, in parameters, within a chunk
  PipelineShape shape;
};

class PipelineStep {
 public:
  // Lays out this rank's chunks and builds the stage's state on them (stage_state.h), which
  // measures the gradient memory alone too.
  static Status create(Communicator& comm, Compute& compute, const ModelSpec& model,
                       const PipelineConfig& config, std::unique_ptr<PipelineStep>* out);

  // Per-layer compute of the whole model (layer indices are the model's), and the idle time
  // the schedule leaves before each op of order() (pipeline_idle).
  void set_layer_compute(LayerCompute* lc) { layer_compute_ = lc, waits_.set_layer_compute(lc); }
  // The last step's waits on the host, each with the collective it waited for.
  const ComputeWaits& waits() const { return waits_; }
  void set_idle(std::vector<double> idle_before) { idle_before_ = std::move(idle_before); }
  void set_mode(StepMode mode) { mode_ = mode; }
  // Logs each step's compute (idle slots, forward and backward per layer, the update per unit)
  // in program order, beside the collectives a recording communicator logs (zb_predict).
  void set_schedule_log(ScheduleLog* log) { schedule_ = log; }

  Status step();    // the schedule's forwards and backwards, then the optimizer
  Status finish();  // waits for collectives still in flight (the weight gathers)
  Status reset();   // initial weights, zero moments, step 0: the start of a replay
  int64_t steps_done() const { return state_->step(); }
  // The last step's waits of compute for communication: all of them, and those after the last
  // backward (the reductions still running when backward ended).
  double last_exposed_s() const { return exposed_s_; }
  double last_tail_s() const { return tail_s_; }

  // Communication alone, each waited for: the reductions of one chunk as one micro-batch's
  // backward issues them (dp and z1: as its last micro-batch does), and the weight gathers
  // of a step (none for dp). The state is meaningless afterwards.
  Status reduce_chunk(int chunk);
  Status gather_weights();

  const std::vector<PipeOp>& order() const { return order_; }
  const PipelineLayout& layout() const { return layout_; }
  const StageState& state() const { return *state_; }
  const MemoryTracker& tracker() const { return state_->tracker(); }
  int64_t measured_state_bytes() const { return state_->state_bytes_measured(); }
  int64_t measured_grad_bytes() const { return state_->grad_bytes_measured(); }
  uint64_t slot_elems() const { return state_->max_unit(); }

  Trace& trace() { return trace_; }
  // Every collective of the traffic log from `first` up to `end` as a span, labelled with its unit,
  // chunk, micro-batch and issue time (microseconds after `origin_s`).
  void add_comm_spans(size_t first, double origin_s, size_t end = SIZE_MAX);

  std::vector<Segment> check_segments() const { return state_->check_segments(); }
  Status state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
    return state_->to_host(segments, out);
  }

 private:
  PipelineStep(Communicator& comm, Compute& compute, const PipelineConfig& config, PipelineLayout layout,
               std::unique_ptr<StageState> state);
  Status idle(double seconds);
  Status forward(const PipeOp& op);
  Status backward(const PipeOp& op);
  Status unit_backward(int unit, int microbatch, void* grad, bool accumulate);
  Status reduce(int unit, int microbatch, void* grad);
  Status add_oldest_pending();
  Status optimizer();
  Status update_unit(size_t unit);
  Status gather_unit(size_t unit);
  void label(int unit, int microbatch);
  int chunk_of(int unit) const;
  bool computing() const { return mode_ != StepMode::comm_only; }
  bool communicating() const { return mode_ != StepMode::compute_only; }

  Communicator& comm_;
  Compute& compute_;
  PipelineConfig config_;
  PipelineLayout layout_;
  std::unique_ptr<StageState> state_;
  const StageModel& model_;  // the state's row
  const FlatLayout& flat_;   // the state's layout: layout_.flat
  std::vector<PipeOp> order_;
  std::vector<double> idle_before_;
  int rank_, ranks_;          // the state's own block and the ranks its sums cover
  Event slot_free_[2];       // z2: the reduce-scatter of the state's slot is done
  int next_slot_ = 0;
  struct Pending {
    int slot, unit, microbatch;
  };
  std::deque<Pending> pending_;      // reduced blocks in slots, not yet added into the shard
  std::vector<Event> weights_ready_;  // per unit: its updated weights are gathered
  double exposed_s_ = 0, tail_s_ = 0;
  StepMode mode_ = StepMode::full;
  LayerCompute* layer_compute_ = nullptr;
  ScheduleLog* schedule_ = nullptr;
  Trace trace_;
  ComputeWaits waits_;
  struct LogLabel {
    int unit = -1, chunk = -1, microbatch = -1;
  };
  std::vector<LogLabel> log_labels_;  // traffic log index -> what it moved, for the trace
};

}  // namespace zb
