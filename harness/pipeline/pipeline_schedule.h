// Pipeline schedules: the order in which one pipeline rank runs the forward and backward of its
// model chunks over a step's micro-batches (Megatron's 1F1B, interleaved when a rank holds
// several chunks), and the idle time its warm-up and cool-down leave, found by replaying every
// rank of the pipeline.
#pragma once

#include <utility>
#include <vector>

#include "harness/core/status.h"

namespace zb {

// M micro-batches per step; each of P pipeline ranks holds C model chunks (virtual pipeline
// stages): chunk c of rank p is virtual stage c * P + p of the P * C the model is cut into.
struct PipelineShape {
  int microbatches = 1, chunks = 1, stages = 1, rank = 0;
  int virtual_stages() const { return chunks * stages; }
  int virtual_stage(int chunk) const { return chunk * stages + rank; }
};

// One slot of a rank's schedule: the forward or backward of one chunk for one micro-batch.
struct PipeOp {
  bool forward;
  int microbatch, chunk;
};

// What Megatron accepts, with messages naming the flags: M, C, P >= 1, 0 <= p < P, and with
// chunks interleaved (C > 1, P > 1) M a multiple of P, since micro-batches enter each chunk in
// groups of P.
Status check_pipeline(const PipelineShape& shape);

// The (micro-batch, chunk) of each forward in an interleaved schedule: micro-batches in groups
// of `group`, each group through chunk 0, then chunk 1, ...; the last group takes the rest.
std::vector<std::pair<int, int>> interleaved_table(int microbatches, int chunks, int group);

// Rank shape.rank's order. C = 1: min(P - p - 1, M) warm-up forwards, then one forward and one
// backward in turn, then the remaining backwards. C > 1: the same with 2 (P - p - 1) + (C - 1) P
// warm-up forwards, forwards in interleaved_table order with group P, and backwards in the same
// order with the chunks reversed. Each chunk sees its micro-batches in order 0..M-1, forward
// and backward.
std::vector<PipeOp> pipeline_order(const PipelineShape& shape);

// Replays the P ranks, each running its order: an op starts when its rank is free and its input
// has arrived (the forward of virtual stage v after v - 1's forward of the same micro-batch; the
// backward of v after v + 1's backward, the last stage's after its own forward), transfers
// taking no time. fwd_s[v] and bwd_s[v] are the seconds virtual stage v computes. Gives, for
// each op of rank shape.rank's order, how long the rank stood idle before it.
Status pipeline_idle(const PipelineShape& shape, const std::vector<double>& fwd_s,
                     const std::vector<double>& bwd_s, std::vector<double>* idle_before);

// A model of `layers` layers cut into `parts` consecutive virtual stages, the remainder one
// layer each to the first ones: [first, end) per stage. Needs layers >= parts.
std::vector<std::pair<int, int>> split_layers(int layers, int parts);

}  // namespace zb
