// A step recorded once and replayed at will: its schedule from the recording backend, each
// collective priced from the sweep (or a tier's link at a given rate), its compute from the
// compute spec, its quantization kernels from their measured rates. What zb_predict reports
// and zb_plan's required_link_gbps column both use.
#pragma once

#include <cmath>
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
  // The quantization kernels' rates, for a quantized step's kernels (null: unquantized).
  const KernelRates* kernels = nullptr;
};

// Two steps, so the second meets what the first leaves in flight (z1/z2's weight gathers), as
// a steady-state step does; the prediction is the second's.
Status record_zero_step(const ModelSpec& model, const ZeroConfig& config, const ComputeSpec& compute,
                        const Topology& topo, RecordedStep* out);
Status record_pipeline_step(const ModelSpec& model, const PipelineConfig& config, const ComputeSpec& compute,
                            const Topology& topo, RecordedStep* out);

// The step replayed, with the links between nodes at `inter_gbps` (NaN: as swept). Sets
// `missing` (once) when the sweep can price some collective neither way.
StepPrediction replay(const RecordedStep& step, const Sweep& sweep, const Tiers& tiers, double inter_gbps,
                      Status* missing, std::vector<TraceSpan>* spans = nullptr,
                      std::vector<OpTiming>* timeline = nullptr);

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
