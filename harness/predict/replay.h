// A step recorded once and replayed at will: its schedule from the recording backend, each
// collective priced from the sweep (or a tier's link at a given rate), its compute from the
// compute spec, its quantization kernels from their measured rates. What zb_predict reports
// and zb_plan's required_link_gbps column both use.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "harness/comm/schedule_log.h"
#include "harness/comm/topology.h"
#include "harness/pipeline/pipeline_step.h"
#include "harness/predict/kernel_rates.h"
#include "harness/predict/simulate.h"
#include "harness/predict/sweep.h"
#include "harness/predict/tiers.h"
#include "harness/stage/layer_compute.h"
#include "harness/zero/zero_step.h"

namespace zb {

struct RecordedStep {
  ScheduleLog log;
  std::vector<CollRecord> traffic;  // the last step's collectives
  ComputeSpec compute;              // a layer's forward; backward twice as long
  Topology topo;
  // The kernels' rates (zb_optimizer): a quantized step's quantization kernels, and, where
  // timed, each backward's synthetic gradient and the optimizer's update (null: neither; a
  // quantized step then cannot be priced, and those two are left out, as 0 s).
  const KernelRates* kernels = nullptr;
  std::string grad_dtype = "bf16";  // the update's rate is the one timed at this gradient dtype
};

// What a compute op of the step costs: the seconds --compute gives it, then the seconds of its
// kernels at their rates (the host's cores busy on a CPU backend), and what the fastest rank
// saves of those (their rank_spread: RankSkew). `host_cores`: the sweep's cores a node (0 on
// devices, where each rank's kernels have a device to themselves: at their side-by-side time).
struct ComputeCost {
  double layer_s = 0, kernel_s = 0, lag_s = 0;
  bool layer_busy = false;  // --compute computes (spin, gemm) rather than sleeps
};
ComputeCost compute_cost(const RecordedStep& step, const ScheduleOp& op, Status* missing, int host_cores = 0);

// A step kernel's expected seconds on a host of `cores` that `ranks` share, where it takes
// `alone_s` run alone and `together_s` with every rank running it at once. Each of the other
// ranks runs its own kernel at a given moment with the chance that the kernel is busy through its
// op: (kernel, plus `layer_s` where the layer computes) over (`layer_s` plus kernel). With m
// kernels running, one takes alone_s while each has a core (m <= cores; with no more ranks than
// cores, which then share only the memory, while it runs alone: m = 1), then longer in
// proportion, up to together_s at m = ranks. Since the busy share grows with the kernel's own
// time, the time is the least fixed point of the two.
double crowded_kernel_seconds(double alone_s, double together_s, double layer_s, bool layer_busy, int ranks,
                              int cores);

// Whether a node's CPU ranks outnumber its cores (`host_cores` 0, on devices: never). Then the
// stream moves on the cores their compute leaves and they leave a blocking wait in waves
// (host_share), and the optimizer's updates, which start in those waves, run alone
// (compute_cost).
bool ranks_outnumber_cores(int host_cores, int ranks_per_node);

// How fast the stream runs while the ranks' compute keeps the host's cores busy, as a fraction
// of its swept speed: on a CPU backend (`host_cores` per node, 0 on devices) the communication
// threads of `ranks_per_node` ranks share the cores with `busy_ranks` busy compute threads
// (default: every rank's), a fair share each and one core at most; 1 on devices.
double busy_stream_rate(int host_cores, int ranks_per_node, int busy_ranks = -1);
// The stream's two rates on such a host (busy_seconds left unset): every rank computing, and,
// where the ranks' busy spells do not overlap (RankSkew), half of them, the ranks taken as
// spread evenly between the fastest and the slowest.
HostShare host_share(int host_cores, int ranks_per_node);

// Two steps, so the second meets what the first leaves in flight (z1/z2's weight gathers), as
// a steady-state step does; the prediction is the second's.
Status record_zero_step(const ModelSpec& model, const ZeroConfig& config, const ComputeSpec& compute,
                        const Topology& topo, RecordedStep* out);
Status record_pipeline_step(const ModelSpec& model, const PipelineConfig& config, const ComputeSpec& compute,
                            const Topology& topo, RecordedStep* out);

// The step replayed, with the links between nodes at `inter_gbps` (NaN: as swept). Sets
// `missing` (once) when the sweep can price some collective neither way. `comm_timeline`
// (optional) gets the ops of the replay with communication alone (comm_s's).
StepPrediction replay(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                      Status* missing, std::vector<TraceSpan>* spans = nullptr,
                      std::vector<OpTiming>* timeline = nullptr, std::vector<OpTiming>* comm_timeline = nullptr);

// How far the step's exposed communication moves with its collectives' times: replayed with
// every collective kExposedPerCommStep longer on the stream (hand-offs and wake-ups kept), the
// relative change of its exposed time over that step's (an elasticity: 1 where the exposed time
// is the collectives', below 1 where part of it is fixed costs, above 1 where the stream's
// backlog gains on compute's lead). `p`: the replay at the sweep's times. NaN where its exposed
// time is under kExposedPerCommFloor of the stream's busy time: a wait that goes from finding
// its collective done to blocking gains a whole hand-off, so a sliver of exposed time moves by
// jumps, not in proportion.
constexpr double kExposedPerCommStep = 0.1;
constexpr double kExposedPerCommFloor = 0.01;
double exposed_per_comm(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                        const StepPrediction& p, Status* missing);

// The seconds the last step's quantization kernels take at their rates (0 unquantized).
double quantize_seconds(const RecordedStep& step, Status* missing);

// The lowest rate of the links between nodes at which the step's exposed communication is
// within `limit` of the step (link_rate.h); NaN on one node or without a link to model.
double step_required_link_gbps(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double limit,
                               Status* missing);

// The rate of the links between nodes below which the quantized step `quantized` is faster than
// `plain`, the same stage unquantized (link_rate.h's crossing_link_gbps); NaN on one node.
double quantized_beats_below_gbps(const RecordedStep& quantized, const RecordedStep& plain, const Sweep& sweep,
                                  const Tiers& tiers, Status* missing);

}  // namespace zb
