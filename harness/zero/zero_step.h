// ZeRO: one training step of each stage (dp, z1, z2, z3, the node-aware hsdp and hpz, and
// ZeRO++ whole, zpp), issuing the real collectives on real buffers, asynchronously on the
// communicator's stream. What a stage keeps and shards, and over which group, is its StageState
// (stage_state.h); this is the order in which the step uses it. Quantized gathers and qgZ's
// reduction are in zero_quantized.cc.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/schedule_log.h"
#include "harness/compute/compute.h"
#include "harness/core/trace.h"
#include "harness/stage/compute_waits.h"
#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/stage/stage_state.h"
#include "harness/zero/quant_ops.h"

namespace zb {

struct ZeroConfig : StageConfig {
  uint64_t bucket_elems = 25ull << 20;  // gradient bucket, in parameters
  double slow_fraction = 0;  // test only (--fault-slow-stage): each full step this much longer
  double late_s = 0;         // test only (--fault-late): this rank sleeps this long after each full step
  // Overlap as real systems do it (bucketed reductions in flight during backward, the
  // weight all-gather of z1/z2 overlapping the next forward, z3 prefetching `prefetch`
  // layers); off serialises every collective after the compute it follows.
  bool overlap = true;
  int prefetch = 1;
  int cpu_threads = 0;  // CPU threads of the quantization kernels (0: all)
};

class ZeroStep {
 public:
  // Lays the model out in the stage's units, builds the state (stage_state.h), then allocates
  // the transient buffers of sharded weights.
  static Status create(Communicator& comm, Compute& compute, const ModelSpec& model,
                       const ZeroConfig& config, std::unique_ptr<ZeroStep>* out);

  Status step();  // one training step: forward, backward, optimizer
  Status finish();  // waits for collectives still in flight (z1/z2's weight all-gathers)
  int64_t steps_done() const { return state_->step(); }

  // The optimizer step by itself, as zb_optimizer times it, part by part, from every rank's
  // full local gradient (the point where backward would end without reducing during it):
  Status begin_step() { return state_->begin_step(), Status::ok(); }
  // this rank's gradient of every element from the weights it sees (z3 gathers them first),
  // with the test fault where step() plants it;
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
  // How long the last step's quantization kernels ran on the compute engine (0 unquantized).
  double last_quantize_s() const { return quantize_s_; }
  // What the step quantizes (the stage's own, or what it takes of the configuration's).
  const Quantization& quantization() const { return quant_; }
  void set_mode(StepMode mode) { mode_ = mode; }
  void set_layer_compute(LayerCompute* lc) { layer_compute_ = lc, waits_.set_layer_compute(lc); }
  // The last step's waits on the host, each with the collective it waited for.
  const ComputeWaits& waits() const { return waits_; }
  // Logs each step's compute (forward and backward per layer, the update per unit) in program
  // order, beside the collectives a recording communicator logs (zb_predict).
  void set_schedule_log(ScheduleLog* log) { schedule_ = log; }
  // Spans of the steps while tracing is on: compute scopes, waits of compute for
  // communication (host-timed ones), and every collective from the traffic log labelled with
  // the unit it moved and when it was issued (microseconds after `origin_s`), from log entry
  // `first_log_index` up to `end_log_index`.
  Trace& trace() { return trace_; }
  void add_comm_spans(size_t first_log_index, double origin_s, size_t end_log_index = SIZE_MAX);

  const StageState& state() const { return *state_; }
  const FlatLayout& layout() const { return state_->layout(); }
  const MemoryTracker& tracker() const { return state_->tracker(); }
  int64_t measured_state_bytes() const { return state_->state_bytes_measured(); }
  std::vector<Segment> check_segments() const { return state_->check_segments(); }
  Status state_to_host(const std::vector<Segment>& segments, CheckState* out) const {
    return state_->to_host(segments, out);
  }

 private:
  ZeroStep(Communicator& comm, Compute& compute, const ZeroConfig& config, std::unique_ptr<StageState> state);
  Status update_unit(size_t unit);
  // The collectives, skipped in compute-only mode, awaited at once without overlap.
  Status reduce(const Unit& u, int unit, const void* grad_src);
  Status gather(int unit, size_t buffer, Event* done, bool backward = false);
  // Whether position `pos` of the step's gathers travels quantized, and its dequantization
  // into the gathered buffer once it has arrived.
  bool gathers_quantized(size_t pos) const;
  Status dequantize_gathered(int unit, size_t buffer);
  Status issue_gathers(size_t pos);
  Status keep_node_copy(size_t pos, const Bf16* gathered);
  Status forward();
  Status backward();
  Status optimizer();
  Status gathered_weights(size_t pos, Bf16** weights);
  Status compute_after(const Event& e);
  Status layer_backward(const Unit& u, int layer, const Bf16* weights, void* grad);
  Status padding_grad(const Unit& u, const Bf16* weights, void* grad);
  bool computing() const { return mode_ != StepMode::comm_only; }

  // ---- Quantized collectives (zero_quantized.cc).
  Status create_quantized();
  Status quantized_gather(int unit, size_t buffer, Group group);
  Status exchange_amax();  // FP8: every unit's amax, the maximum over its shards
  // qgZ: a unit's reduction in phases (quantize and the node's all-to-all; sum, requantize and
  // the all-to-all across nodes; dequantize and add into the shard), each phase started when the
  // next unit's reduction starts, so the previous one's all-to-all runs behind a unit of
  // backward. drain_reductions completes every one in flight.
  struct PendingReduce {
    int unit, set, phase;
    Event done;
  };
  Status start_reduction(const Unit& u, int unit, const void* grad);
  Status advance(PendingReduce& p, bool* finished);
  Status drain_reductions();
  Status combine(const Unit& u, const uint8_t* pieces, int count);
  bool kernels_run() const { return mode_ != StepMode::compute_only && compute_.kind() != MemKind::reserved; }
  uint8_t* gather_send(size_t b) const { return qgather_send_[b].as<uint8_t>(); }
  uint8_t* gather_recv(size_t b) const { return qgather_recv_[b].as<uint8_t>(); }

  Communicator& comm_;
  Compute& compute_;
  ZeroConfig config_;
  std::unique_ptr<StageState> state_;
  const StageModel& model_;          // the state's row
  const FlatLayout& layout_;         // the state's layout
  const RankPlace& place_;           // the state's ranks
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

  Quantization quant_;
  std::unique_ptr<QuantOps> qops_;
  double quantize_s_ = 0;
  // Quantized gathers: per gathered buffer, this rank's block as one piece, and every rank's.
  std::vector<Buffer> qgather_send_, qgather_recv_;
  // FP8: each unit's amax of this rank's shard, every rank's, and the unit's (engine memory),
  // with a host copy where the engine is a GPU.
  Buffer amax_own_, amax_all_, amax_;
  std::vector<float> amax_host_;
  // qgZ's hops: within the node over S ranks (when S > 1 or there is one node) and across the
  // R nodes (when R > 1); two sets of buffers, each for one unit's reduction in flight, and a
  // piece dequantized for the final sum.
  int hop_node_ = 0, hop_cross_ = 0;  // ranks of each hop's group; 0: no such hop
  Buffer qsend1_[2], qrecv1_[2], qsend2_[2], qrecv2_[2], qsum_;
  std::deque<PendingReduce> pending_;
  int next_set_ = 0;
};

}  // namespace zb
