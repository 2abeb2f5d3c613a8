// The stages of sharded data parallelism, stated once: what each keeps of every category of
// model state, over which group it shards it (all data-parallel ranks, or the ranks of one
// node), and what units its collectives move. The ZeRO step, the optimizer step, the formulas
// and the planner all read this table; a new stage is one entry here plus its schedule. What a
// step sends quantized (stage/quantization.h) follows from the same row: the gathers of weights
// sharded over all N and the reductions of gradients sharded over all N may be quantized, and
// ZeRO++ as a whole (zpp) always is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/core/status.h"
#include "harness/stage/quantization.h"

namespace zb {

enum class Stage { dp, z1, z2, z3, hsdp, hpz, zpp };

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
  // What the stage always quantizes (zpp: ZeRO++ as a whole, hpz with qwZ and qgZ); none for
  // the rest, which quantize only as --quantize-weights and --quantize-grads ask.
  Quantization own_quantization{};

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

  // Quantization (ZeRO++): the gathers of weights sharded over all N (qwZ, or torchtitan's FP8),
  // and the reductions of gradients sharded over all N, whose reduce-scatter becomes qgZ's
  // all-to-all within the node then across nodes. `effective` is what a step runs when asked
  // for `requested`: the stage's own quantization where it has one, else what it can take of
  // the request. A quantized stage cannot end bit for bit on the reference.
  bool can_quantize_weights() const { return weights == Sharding::dp_group; }
  bool can_quantize_grads() const { return grads == Sharding::dp_group; }
  bool quantized() const { return own_quantization.any(); }
  Quantization effective(const Quantization& requested) const;

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
  // - quantized, a pass moves bytes, counted as BF16 elements (bytes / 2): qwZ's INT8 gather
  //   (1 + 4/B)/2 of Ψ with B-element blocks, FP8's 1/2; qgZ's all-to-all within the node
  //   (1/2 + 4/B)/2 for INT4 and across nodes 1/S of that (each rank sends its node's sum of
  //   its 1/S), each hop only where its group has more than one rank (one node: the node
  //   hop alone). FP8 adds one all-gather of every layer's amax (an FP32 from each rank per
  //   unit: `unit_elements` BF16 elements per rank and unit, whatever Ψ).
  enum class Carries { weights, grads, amax };
  struct Pass {
    Coll op;
    Group group;
    double psi;
    Carries carries = Carries::weights;
    const char* as = "bf16";  // bf16, int8, fp8, int4, or "grad" (the gradient dtype)
    double unit_elements = 0;
  };
  std::vector<Pass> passes(int64_t ranks_per_node, int64_t nodes, const Quantization& requested = {}) const;
  // - elements of the full vector communicated per step over Ψ, counted as the ZeRO paper
  //   does: an all-reduce is a reduce-scatter plus an all-gather, so it counts twice (the
  //   amax exchange's few elements per unit are not a share of Ψ: step_traffic adds them).
  double volume_psi(int64_t ranks_per_node = 1, int64_t nodes = 1, const Quantization& requested = {}) const;
};

const StageModel& stage_model(Stage stage);
const char* stage_name(Stage stage);
Status parse_stage(const std::string& text, Stage* out);
// The stages that end bit for bit on the reference (every row but the quantized ones): the
// default of --stages and the set every exact test runs. dp, z1, z2, z3, hsdp, hpz.
const std::vector<Stage>& all_stages();
// Every row of the table, the quantized ones (zpp) included.
const std::vector<Stage>& table_stages();
const std::vector<std::string>& stage_names();  // of table_stages()
std::vector<std::pair<std::string, Stage>> stage_choices();  // every stage by name, for flags

// The row that shards as `stage` does and quantizes nothing of its own (zpp: hpz; the others:
// themselves): what a quantized configuration is weighed against.
Stage unquantized_stage(Stage stage);

// A configuration's name: the stage, and what it quantizes beyond its own row ("z3",
// "z3+qw:int8", "z2+qg:int4", "zpp").
std::string config_label(Stage stage, const Quantization& requested);
// The same as a file name's part ("z3+qw_int8"): a trace per configuration.
std::string config_file_label(Stage stage, const Quantization& requested);

}  // namespace zb
