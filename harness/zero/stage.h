// The stages of sharded data parallelism, stated once: what each keeps of every category of
// model state, over which group it shards it, and what units its collectives move. The ZeRO
// step, the optimizer step, the formulas and the planner all read this table; a new stage is
// one entry here plus its schedule.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/core/status.h"

namespace zb {

enum class Stage { dp, z1, z2, z3 };

// Over whom a category of state is split: nobody (every rank holds all of it), or the ranks
// of the data-parallel group (each holds 1/N).
enum class Sharding { replicated, dp_group };

// What one collective of the step moves: a gradient bucket (whole layers, filled in backward
// order), or a single layer (gathered just before it is used).
enum class UnitKind { buckets, layers };

struct StageModel {
  Stage stage;
  const char* name;     // "z2": flag value and benchmark name segment
  const char* article;  // "w+(g+o)/N": the article's resident bytes per parameter
  Sharding weights, grads, optimizer;  // optimizer: the FP32 master and the moments
  UnitKind units;

  bool shards_weights() const { return weights == Sharding::dp_group; }
  bool shards_grads() const { return grads == Sharding::dp_group; }
  bool shards_optimizer() const { return optimizer == Sharding::dp_group; }
  bool shards_anything() const { return shards_weights() || shards_grads() || shards_optimizer(); }

  // What follows from the sharding, for one training step:
  // - a rank that updates every parameter needs the whole reduced gradient (all-reduce); one
  //   that updates its shard needs only its part (reduce-scatter);
  int all_reduces() const { return shards_optimizer() ? 0 : 1; }
  int reduce_scatters() const { return shards_optimizer() ? 1 : 0; }
  // - weights updated shard by shard but held whole are gathered once after the update;
  //   sharded weights are gathered before the forward and again before the backward, since
  //   they are released in between;
  int all_gathers() const { return shards_weights() ? 2 : shards_optimizer() ? 1 : 0; }
  // - elements of the full vector communicated per step over Ψ, counted as the ZeRO paper
  //   does: an all-reduce is a reduce-scatter plus an all-gather, so it counts twice.
  double volume_psi() const { return 2.0 * all_reduces() + reduce_scatters() + all_gathers(); }
};

const StageModel& stage_model(Stage stage);
const char* stage_name(Stage stage);
Status parse_stage(const std::string& text, Stage* out);
const std::vector<Stage>& all_stages();  // dp, z1, z2, z3
const std::vector<std::string>& stage_names();
std::vector<std::pair<std::string, Stage>> stage_choices();  // every stage by name, for flags

}  // namespace zb
