// Memory and DP traffic per GPU for a model under a TP/PP/EP/DP layout, computed without running.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/dtype.h"
#include "harness/core/status.h"
#include "harness/plan/offload_formula.h"
#include "harness/plan/state_formula.h"

namespace zb {

// One parallel layout. world = tp * pp * dp. Expert parallelism is carved out
// of data parallelism (the Megatron convention): the dp ranks that share a
// TP/PP position are split into ep groups, each holding 1/ep of the experts.
// An expert's weights are therefore replicated only across the dp/ep ranks at
// the same EP position, which is its ZeRO sharding factor; ep must divide dp.
struct Layout {
  double params = 0;  // Ψ of the whole model
  int64_t dp = 1, tp = 1, pp = 1, ep = 1;
  double expert_fraction = 0;  // share of Ψ in expert weights, in [0, 1]
  // Data-parallel ranks that share a node: what hsdp shards over and hpz keeps its node copy
  // over; nodes hold consecutive ranks. 0: gcd(dp, 8), an 8-GPU node's share of a dp group.
  int64_t dp_per_node = 0;
  Optimizer optimizer = Optimizer::adam;
  DType grad_dtype = DType::bf16;
  // What leaves the GPU for pinned host memory (offload_formula.h), through `slots` slots of
  // one chunk (params per GPU / chunks) each, for a step of `microbatches` micro-batches.
  Offload offload = Offload::none;
  int64_t slots = 2, chunks = 1, microbatches = 1;
  int64_t world() const { return tp * pp * dp; }
};

// Degrees are capped so that tp * pp * dp cannot overflow.
constexpr int64_t kMaxDegree = int64_t(1) << 20;

// dp from a world size: the ranks left after TP and PP; world must divide evenly.
Status dp_from_world(int64_t world, int64_t tp, int64_t pp, int64_t* dp);
// Everything about a layout that makes it impossible; messages are one line
// naming the flag at fault and what is allowed.
Status check_layout(const Layout& layout);
// dp_per_node as given, or its default; and the expert group's share of a node: EP groups
// sit within a node, so a node holds dp_per_node/ep ranks at each EP position (1 when ep does
// not divide dp_per_node: the ranks at one EP position are then taken as one per node).
int64_t dp_per_node(const Layout& layout);
int64_t expert_dp_per_node(const Layout& layout);

// A row's offload columns; all zero when nothing is offloaded. Per parameter means per
// parameter the GPU holds before sharding (params_per_gpu), as bytes_per_param does.
struct OffloadRow {
  double host_bytes = 0, host_bytes_per_param = 0;  // pinned host memory per GPU
  double slot_bytes = 0;                            // the device slots, transient
  double device_bytes = 0, device_bytes_per_param = 0;  // state left on the device + slots
  double device_saved_bytes = 0;  // bytes_per_gpu - device_bytes; negative when slots outweigh
  double d2h_bytes_per_step = 0, h2d_bytes_per_step = 0, pcie_bytes_per_step = 0;
  double pcie_bytes_per_param = 0;  // pcie_bytes_per_step / params_per_gpu
};

// One stage of one layout, per GPU. Parameter counts are fractional when a
// degree does not divide Ψ; padding is a property of a real layout (zb_zero),
// not of the plan.
struct PlanRow {
  Stage stage = Stage::dp;
  Quantization quant;  // what the stage quantizes (StageModel::effective of what was asked)
  int64_t dp = 1, tp = 1, pp = 1, ep = 1, world = 1;
  double dense_params = 0, expert_params = 0;  // held before ZeRO sharding
  double params_per_gpu = 0;                   // dense + expert
  int64_t dense_shard = 1, expert_shard = 1;   // ZeRO sharding factors: dp and dp/ep
  CategoryBytes bytes;                         // resident bytes per GPU, by category
  double bytes_per_gpu = 0, gb_per_gpu = 0;    // 1 GB = 1e9 bytes
  double bytes_per_param = 0;                  // bytes_per_gpu / params_per_gpu
  // Data-parallel collectives only: TP, PP and EP (all-to-all) traffic is not counted.
  double volume_psi = 0;         // elements_per_step / params_per_gpu
  double elements_per_step = 0;  // volume convention, see step_traffic()
  double bytes_per_step = 0;     // ring ideal wire bytes sent by this GPU
  // Nodes: the volume whose groups span nodes, and the bytes the node sends to other nodes
  // per step, shared out over its data-parallel ranks (ring ideal, nodes of consecutive ranks).
  int64_t dp_per_node = 1;
  double volume_psi_inter = 0;
  double inter_node_bytes_per_step = 0;
  OffloadRow offload;
  // The slowest link between nodes that keeps the step's exposed communication within a share
  // of it (zb_predict's required_link_gbps), when zb_plan was given a sweep (link_priced); NaN
  // on one node or where no rate suffices.
  bool link_priced = false;
  double required_link_gbps = NAN;
};

// `quant`: --quantize-weights and --quantize-grads, as the stage takes them. Quantization moves
// fewer bytes and keeps the same resident state; FP8's amax exchange (an FP32 per rank and
// layer) is left out, since a plan has no layers.
PlanRow plan_row(const Layout& layout, Stage stage, const Quantization& quant = {});

// Console output: one header for the model, then one table per dp degree.
std::string format_plan_header(const Layout& layout);
std::string format_plan_table(const std::vector<PlanRow>& rows);
// {"model": {...}, "rows": [...]}, with every row of every dp degree, keys in this order.
nlohmann::ordered_json plan_json(const Layout& layout, const std::vector<PlanRow>& rows);

}  // namespace zb
