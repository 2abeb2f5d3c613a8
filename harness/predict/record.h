// Recording a step's schedule: the ZeRO step itself run on the recording backend over reserved
// memory, so what is replayed is exactly what the benchmark issues, at any model size.
#pragma once

#include "harness/comm/schedule_log.h"
#include "harness/pipeline/pipeline_step.h"
#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/zero/zero_step.h"

namespace zb {

// Rank topo.rank of `topo` running `steps` steps of `config` on `model`: its compute, the
// collectives it issues and its waits on them, in program order. `traffic` (optional) gets
// the collectives of the last step alone, as the traffic log of a real run would hold them.
Status record_zero_schedule(const ModelSpec& model, const ZeroConfig& config, const Topology& topo,
                            int steps, ScheduleLog* log, std::vector<CollRecord>* traffic = nullptr);

// The same for the pipeline step of `config` (its pipeline rank is config.shape.rank), with the
// idle slots its schedule leaves when every virtual stage computes `compute` per layer.
Status record_pipeline_schedule(const ModelSpec& model, const PipelineConfig& config, const ComputeSpec& compute,
                                const Topology& topo, int steps, ScheduleLog* log,
                                std::vector<CollRecord>* traffic = nullptr);

}  // namespace zb
