// The stages of sharded data parallelism, stated once: what each keeps of every category of
// model state, over which group it shards it (all data-parallel ranks, or the ranks of one
// node), and what units its collectives move. The ZeRO step, the optimizer step, the formulas
// and the planner all read this table; a new stage is one entry here plus its schedule.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"

namespace zb {

enum class Stage { dp, z1, z2, z3, hsdp, hpz };

// Over whom a category of state is split: nobody (every rank holds all of it), the ranks of
// the data-parallel group (each holds 1/N), or the S ranks of a node (each holds 1/S, and
// every node holds a whole copy: sharded within the node, replicated across nodes).
enum class Sharding { replicated, dp_group, node_group };

// What one collective of the step moves: a gradient bucket (whole layers, filled in backward
// order), or a single layer (gathered just before it is used).
enum class UnitKind { buckets, layers };

struct StageModel {
  Stage stage;
  const char* name;     // "z2": flag value and benchmark name segment
  const char* article;  // "w+(g+o)/N": the article's resident bytes per parameter
  Sharding weights, grads, optimizer;  // optimizer: the FP32 master and the moments
  UnitKind units;
  // ZeRO++'s hierarchical partition: besides its shard over all N, each rank keeps a second
  // copy of the BF16 weights sharded over its node (w/S), cut from forward's gather, so that
  // backward gathers from it within the node and never across nodes.
  bool node_weight_copy = false;

  bool shards_weights() const { return weights != Sharding::replicated; }
  bool shards_grads() const { return grads != Sharding::replicated; }
  bool shards_optimizer() const { return optimizer != Sharding::replicated; }
  bool shards_anything() const { return shards_weights() || shards_grads() || shards_optimizer(); }
  // The group each category is split over (the world for replicated state, which no
  // collective splits).
  static Group group_of(Sharding s) { return s == Sharding::node_group ? Group::node : Group::world; }
  Group weight_group() const { return group_of(weights); }
  Group optimizer_group() const { return group_of(optimizer); }
  // Backward's gathers come from the node copy where the stage keeps one.
  Group backward_gather_group() const { return node_weight_copy ? Group::node : weight_group(); }
  // State sharded over the node is replicated across nodes, so each node's reduced shard of
  // the gradient must still be summed over the nodes: an all-reduce over the cross-node group
  // (when there is more than one node; on one node the stage is z3).
  bool reduces_across_nodes() const { return optimizer == Sharding::node_group; }

  // What follows from the sharding, for one training step:
  // - a rank that updates every parameter needs the whole reduced gradient (all-reduce); one
  //   that updates its shard needs only its part (reduce-scatter);
  int all_reduces() const { return shards_optimizer() ? 0 : 1; }
  int reduce_scatters() const { return shards_optimizer() ? 1 : 0; }
  // - weights updated shard by shard but held whole are gathered once after the update;
  //   sharded weights are gathered before the forward and again before the backward, since
  //   they are released in between;
  int all_gathers() const { return shards_weights() ? 2 : shards_optimizer() ? 1 : 0; }
  // - the same collectives with the group each runs over, and the share of Ψ its buffers
  //   add up to over a step: the cross-node all-reduce moves one node shard, Ψ/S, where S
  //   is `ranks_per_node`, and only where there are several `nodes`.
  struct Pass {
    Coll op;
    Group group;
    double psi;
  };
  std::vector<Pass> passes(int64_t ranks_per_node, int64_t nodes) const;
  // - elements of the full vector communicated per step over Ψ, counted as the ZeRO paper
  //   does: an all-reduce is a reduce-scatter plus an all-gather, so it counts twice.
  double volume_psi(int64_t ranks_per_node = 1, int64_t nodes = 1) const;
};

const StageModel& stage_model(Stage stage);
const char* stage_name(Stage stage);
Status parse_stage(const std::string& text, Stage* out);
const std::vector<Stage>& all_stages();  // dp, z1, z2, z3, hsdp, hpz
const std::vector<std::string>& stage_names();
std::vector<std::pair<std::string, Stage>> stage_choices();  // every stage by name, for flags

}  // namespace zb
