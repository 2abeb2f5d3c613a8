// ZeRO state and traffic formulas, from the stage table: the one copy that zb_zero and zb_plan
// both use.
#pragma once

#include <cstdint>

#include "harness/compute/optimizer_config.h"
#include "harness/stage/stage.h"

namespace zb {

// Gradient dtypes are harness/core/dtype.h's DType; these formulas take their size in
// bytes (dtype_size: 2 for bf16, 4 for fp32) as grad_bytes.

// Weights are always BF16 and the master copy always FP32; only the gradient
// dtype and the number of FP32 moments vary between the configurations we model.
constexpr double kWeightBytes = 2;
constexpr double kMasterBytes = 4;

// Unsharded bytes per parameter: w, g and o = master + moments (12 or 8).
struct StateBytes {
  double weights, grads, optimizer;
  double total() const { return weights + grads + optimizer; }
};
StateBytes state_bytes(Optimizer optimizer, int grad_bytes);

// Resident bytes per parameter on one rank, split the way the memory tracker
// reports them, for a stage sharding over n replicas, s of them on each node (s = 0: all n
// on one node). hpz's node copy of the weights counts as weights.
struct CategoryBytes {
  double weights = 0, grads = 0, master = 0, moments = 0;
  double total() const { return weights + grads + master + moments; }
};
CategoryBytes bytes_per_param_by_category(Stage stage, Optimizer optimizer, int grad_bytes,
                                          int64_t n, int64_t s = 0);
// dp: w+g+o; z1: w+g+o/n; z2: w+(g+o)/n; z3: (w+g+o)/n; hsdp: (w+g+o)/s;
// hpz: (w+g+o)/n + w/s.
double bytes_per_param(Stage stage, Optimizer optimizer, int grad_bytes, int64_t n, int64_t s = 0);

// Elements of the full parameter vector communicated per step, divided by Ψ: 2 for dp, z1,
// z2, 3 for z3 and hpz, 3 + 2/s for hsdp over several nodes (3 on one: it is z3 there)
// (StageModel::volume_psi). Quantized (`q`, as the stage takes it), in BF16 elements: z3 with
// INT8 weights 2(1 + 4/B)/2 + 1, zpp on one node (1 + 4/B)/2 + 1 + (1/2 + 4/B)/2, B = 4096.
double volume_psi(Stage stage, int64_t s = 1, int64_t nodes = 1, const Quantization& q = {});

// One step's data-parallel collectives for psi parameters replicated over n
// ranks. Element counts are full-buffer sizes (what a log of issued collectives
// records); elements applies the volume convention (an all-reduce counts twice).
// wire_bytes is one rank's ideal ring traffic: each full-buffer pass sends
// (n-1)/n of it, weights travel as BF16 and gradients in their own dtype.
// With nodes (n ranks, s per node, nodes holding consecutive ranks), the same passes split by
// whether their group spans nodes, and what one node sends to the others under rings in rank
// order: a world ring leaves each node once (one rank's sends), a cross-node ring from every
// rank of the node. Quantized (`q`), passes move bytes counted as BF16 elements, and FP8's amax
// exchange adds an FP32 per rank and unit: `units` of them (the model's layers).
struct StepTraffic {
  double all_reduce_elements = 0;      // gradients (dp; hsdp's shard across nodes)
  double reduce_scatter_elements = 0;  // gradients (z1, z2, z3, hsdp, hpz)
  double all_to_all_elements = 0;      // quantized gradients (qgZ: z2, z3, hpz when asked; zpp)
  double all_gather_elements = 0;      // weights (z1, z2: once; z3, hsdp, hpz: twice), FP8 amaxes
  double elements = 0;                 // volume_psi(stage, s) * psi
  double wire_bytes = 0;               // per rank, ring ideal; 0 when n == 1
  double intra_elements = 0, inter_elements = 0;  // elements, by group within or across nodes
  double inter_node_bytes = 0;         // one node to the others, ring ideal
};
StepTraffic step_traffic(Stage stage, int64_t n, double psi, int grad_bytes, int64_t s = 0,
                         const Quantization& q = {}, int64_t units = 0);

}  // namespace zb
