// Pipeline layout: what of the model a pipeline rank holds, laid out chunk by chunk.
#pragma once

#include <utility>
#include <vector>

#include "harness/core/status.h"
#include "harness/pipeline/pipeline_schedule.h"
#include "harness/stage/model.h"

namespace zb {

// This rank's share of the model: the layers of its chunks (chunk c is virtual stage c * P + p)
// and their flat layout, whose units (gradient buckets) never cross a chunk.
struct PipelineLayout {
  std::vector<int> layers;  // local layer -> layer of the whole model; chunk 0's first
  FlatLayout flat;          // over the local layers
  std::vector<std::pair<int, int>> chunk_units;  // [first, end) units of each chunk
  std::vector<std::pair<int, int>> virtual_layers;  // [first, end) model layers per virtual stage
};
Status make_pipeline_layout(const ModelSpec& model, const PipelineShape& shape, uint64_t bucket_elems,
                            int ranks, int pad_to, PipelineLayout* out);

}  // namespace zb
