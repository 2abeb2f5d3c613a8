// zb_plan: memory and DP traffic per GPU for a model and a TP/PP/EP/DP layout, running nothing.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/files.h"
#include "harness/driver/flags.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"
#include "harness/plan/pipeline_formula.h"
#include "harness/plan/pipeline_plan.h"
#include "harness/plan/plan.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/replay.h"
#include "harness/stage/stage_json.h"

namespace {

struct Options {
  std::vector<int64_t> dps;
  std::string json_path;
  int64_t world = 0, tp = 1, pp = 1, ep = 1, ranks_per_node = 0;
  int64_t microbatches = 0;  // pipeline rows when > 0
  zb::Offload offload = zb::Offload::none;
  std::vector<int64_t> slots = {2};
  double expert_fraction = 0;
  // The required_link_gbps column: a sweep to price the collectives, the compute per layer.
  std::string sweep, compute = "none";
  int64_t layers = 32;
  int64_t node_links = -1;  // -1 until given, then as zb_predict's (0: one per rank)
  // NaN until given, so that either given without --sweep is refused; then their defaults.
  double exposed_limit = NAN, handoff_us = NAN;
};


// Each row's required_link_gbps: the row's stage stepped over its dp ranks (dp_per_node to a
// node) on a model of its GPU's parameters, recorded and replayed as zb_predict does.
zb::Status price_links(const Options& o, const zb::ModelSetup& ms, const zb::Layout& layout, const zb::Sweep& sweep,
                       const zb::Tiers& tiers, const zb::ComputeSpec& compute, std::vector<zb::PlanRow>* rows) {
  for (zb::PlanRow& r : *rows) {
    // A quantized pass's kernels need their measured rates (zb_predict --kernels), which the
    // plan has none of: those rows stay unpriced rather than priced as the stage they quantize.
    if (r.quant.any() || zb::stage_model(r.stage).quantized()) continue;
    r.link_priced = true;
    zb::ModelSpec model;
    ZB_RETURN_IF_ERROR(zb::make_model("", std::round(r.params_per_gpu), o.layers, &model));
    zb::ZeroConfig config = ms.step;
    config.stage = r.stage;
    config.bucket_elems = ms.bucket_mb > 0 ? ms.step.bucket_elems : zb::ZeroConfig().bucket_elems;
    zb::Topology topo;
    ZB_RETURN_IF_ERROR(zb::modelled_topology(int(r.dp), int(zb::dp_per_node(layout)), &topo));
    zb::RecordedStep step;
    ZB_RETURN_IF_ERROR(zb::record_zero_step(model, config, compute, topo, &step));
    zb::Status missing;
    r.required_link_gbps = zb::step_required_link_gbps(step, sweep, tiers, o.exposed_limit, &missing);
    ZB_RETURN_IF_ERROR(missing);
  }
  return zb::Status::ok();
}

// The dp degrees to plan: from --dp, from --world, or from both when they agree.
zb::Status resolve_dps(const Options& o, std::vector<int64_t>* dps) {
  if (o.dps.empty() && o.world == 0)
    return zb::Status::error("needs --dp=N (or a list 1,2,4,...) or --world=W; see --help");
  *dps = o.dps;
  if (o.world == 0) return zb::Status::ok();
  int64_t dp_of_world = 0;
  ZB_RETURN_IF_ERROR(zb::dp_from_world(o.world, o.tp, o.pp, &dp_of_world));
  if (dps->empty()) {
    dps->push_back(dp_of_world);
  } else if (dps->size() > 1) {
    return zb::Status::error("--world fixes a single dp; give one --dp value or leave --world out");
  } else if (dps->front() != dp_of_world) {
    return zb::Status::error("--world=" + std::to_string(o.world) + " is not tp*pp*dp = " +
                             std::to_string(o.tp) + "*" + std::to_string(o.pp) + "*" +
                             std::to_string(dps->front()) + " = " +
                             std::to_string(o.tp * o.pp * dps->front()) +
                             "; make them equal or leave one of --world and --dp out");
  }
  return zb::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  zb::Flags flags("zb_plan",
                  "Memory and data-parallel traffic per GPU for each ZeRO stage of a model under\n"
                  "a TP/PP/EP/DP layout, from the formulas zb_zero verifies. Runs nothing.\n"
                  "The ZeRO sharding factor is dp (experts: dp/ep), not the world size.\n"
                  "--offload adds the host memory and the PCIe copies per step of state kept on host.");
  zb::ModelFlagSpec spec;
  spec.layers = false;
  spec.chunks = true;
  spec.params = 0;
  spec.bucket_mb = 0;
  spec.params_help = "parameters in the whole model, e.g. 7e9";
  spec.bucket_help = "with --microbatches: z2's slots hold one gradient bucket of this many MiB (at most a "
                     "chunk), as zb_pipeline's, whose buckets round up to whole layers (default 0: a whole chunk)";
  spec.stages_help = "stages to plan";
  spec.quantize = true;
  zb::ModelFlags model_flags(flags, spec);
  flags.add_ints("dp", &o.dps, "data-parallel degree N, or a list 1,2,4,8 for a curve", 1, zb::kMaxDegree);
  flags.add_int("world", &o.world, "world size; must equal tp*pp*dp (gives dp when --dp is absent)",
                1, int64_t(1) << 60);
  flags.add_int("tp", &o.tp, "tensor-parallel degree", 1, zb::kMaxDegree);
  flags.add_int("pp", &o.pp, "pipeline-parallel degree", 1, zb::kMaxDegree);
  flags.add_int("ep", &o.ep, "expert-parallel degree, carved out of dp (must divide dp)", 1,
                zb::kMaxDegree);
  flags.add_int("ranks-per-node", &o.ranks_per_node,
                "data-parallel ranks on one node: what hsdp shards over and hpz keeps its node copy "
                "over (default 0: gcd(dp, 8), one 8-GPU node's share)", 0, zb::kMaxDegree);
  flags.add_double("expert-fraction", &o.expert_fraction,
                   "share of params in expert weights (split over ep)", 0, 1);
  flags.add_int("microbatches", &o.microbatches,
                "also plan dp, z1 and pipeline ZeRO-2 accumulating M micro-batches per step", 0, 1 << 20);
  flags.add_choice("offload", &o.offload,
                   "what lives in host memory: none, grads (the stage's gradient), optimizer (also the "
                   "FP32 master and moments, CPU optimizer), weights (also the BF16 weights, streamed in); "
                   "adds host bytes/param, device bytes/param and PCIe bytes per step to every row",
                   zb::offload_choices());
  flags.add_ints("slots", &o.slots, "with --offload: chunk-sized device slots, a count or a list (rows for each)",
                 1, 1024);
  flags.add_string("sweep", &o.sweep, "add the required_link_gbps column, priced from this collective sweep (as "
                   "zb_predict's --sweep): the slowest link between nodes that keeps each row's exposed "
                   "communication within --exposed-limit of its step");
  flags.add_string("compute", &o.compute, "with --sweep: per-layer compute, none, sleep:US or spin:US (forward; "
                   "backward twice as long)");
  flags.add_int("layers", &o.layers, "with --sweep: layers of the model stepped", 1, 1 << 20);
  flags.add_double("exposed-limit", &o.exposed_limit, "with --sweep: the share of the step exposed communication may "
                   "take", 1e-6, 1);
  flags.set_default_text("exposed-limit", zb::fmt(zb::kDefaultExposedLimit, 2));
  flags.add_double("handoff-us", &o.handoff_us, "with --sweep: a blocking wait's hand-off where the sweep timed none "
                   "(as zb_predict's)", 0, 1e6);
  flags.set_default_text("handoff-us", zb::fmt(zb::kDefaultHandoffUs, 0));
  flags.add_int("node-links", &o.node_links, "with --sweep: links each node has to the others (as zb_predict's; "
                "default 0: one per rank)", 0, 1 << 20);
  flags.add_string("json", &o.json_path, "also write the rows as JSON to this path");
  flags.allow_benchmark_flags(false);

  std::vector<std::string> passthrough;
  bool help = false;
  zb::Status s = flags.parse(argc, argv, &passthrough, &help);
  if (help) {
    std::cout << flags.usage();
    return 0;
  }
  zb::ModelSetup ms;
  if (s) s = model_flags.resolve(&ms);
  std::vector<int64_t> dps;
  if (s) s = resolve_dps(o, &dps);
  std::vector<zb::Stage> piped;
  for (zb::Stage st : ms.stages)
    if (zb::is_pipeline_stage(st)) piped.push_back(st);
  const bool offload = o.offload != zb::Offload::none;
  if (s && ms.chunks != 1 && o.microbatches == 0 && !offload)
    s = zb::Status::error("--chunks needs --microbatches=M or --offload");
  if (s && ms.bucket_mb > 0 && o.microbatches == 0 && o.sweep.empty())
    s = zb::Status::error("--bucket-mb sizes the pipeline's slots, or with --sweep the gradient buckets; it needs "
                          "--microbatches=M or --sweep");
  zb::Sweep sweep;
  zb::ComputeSpec compute;
  const bool priced = !o.sweep.empty();
  if (s && !priced && (o.compute != "none" || o.layers != 32 || !std::isnan(o.exposed_limit) ||
                       !std::isnan(o.handoff_us) || o.node_links >= 0))
    s = zb::Status::error("--compute, --layers, --exposed-limit, --handoff-us and --node-links describe the step "
                          "--sweep prices; give --sweep too");
  if (std::isnan(o.exposed_limit)) o.exposed_limit = zb::kDefaultExposedLimit;
  if (std::isnan(o.handoff_us)) o.handoff_us = zb::kDefaultHandoffUs;
  if (s && priced) s = zb::Sweep::load(o.sweep, o.handoff_us * 1e-6, &sweep);
  if (s) s = zb::parse_compute_spec(o.compute, &compute);
  if (s && compute.kind == zb::ComputeSpec::Kind::gemm)
    s = zb::Status::error("--compute=gemm has no time to plan with; use sleep:US or spin:US");
  const zb::Tiers tiers = priced ? zb::fit_tiers(sweep, int(std::max<int64_t>(0, o.node_links))) : zb::Tiers();
  if (s && o.slots != std::vector<int64_t>{2} && !offload)
    s = zb::Status::error("--slots needs --offload=grads|optimizer|weights");
  if (s && o.microbatches > 0 && piped.empty() && !offload)
    s = zb::Status::error("--microbatches plans dp, z1 and z2; --stages names none of them");

  zb::Layout layout;
  layout.params = double(ms.params);
  layout.tp = o.tp, layout.pp = o.pp, layout.ep = o.ep;
  layout.expert_fraction = o.expert_fraction;
  layout.dp_per_node = o.ranks_per_node;
  layout.optimizer = ms.step.optimizer.kind;
  layout.grad_dtype = ms.step.grad_dtype;
  layout.offload = o.offload;
  layout.chunks = ms.chunks;
  layout.microbatches = o.microbatches > 0 ? o.microbatches : 1;
  // Without offload the slot count changes nothing: one pass.
  const std::vector<int64_t> slot_counts = offload ? o.slots : std::vector<int64_t>{o.slots.front()};

  // Every layout is checked before anything is printed, so a bad entry in a --dp list gives
  // one error line and no partial table. One table per slot count and dp degree.
  struct Tables {
    int64_t slots;
    std::vector<std::vector<zb::PlanRow>> rows;
    std::vector<std::vector<zb::PipelinePlanRow>> pipeline;
  };
  std::vector<Tables> all;
  for (int64_t sl : slot_counts) {
    layout.slots = sl;
    Tables t{sl, {}, {}};
    for (int64_t dp : dps) {
      if (!s) break;
      layout.dp = dp;
      s = zb::check_layout(layout);
      if (!s) break;
      std::vector<zb::PlanRow> rows;
      for (zb::Stage st : ms.stages)
        for (const zb::Quantization& q : ms.quantizations(st)) rows.push_back(zb::plan_row(layout, st, q));
      if (priced) s = price_links(o, ms, layout, sweep, tiers, compute, &rows);
      if (!s) break;
      t.rows.push_back(rows);
      std::vector<zb::PipelinePlanRow> prow;
      for (zb::Stage st : o.microbatches > 0 ? piped : std::vector<zb::Stage>{})
        prow.push_back(zb::pipeline_plan_row(layout, st, int(o.microbatches), ms.chunks,
                                             double(ms.step.bucket_elems)));
      t.pipeline.push_back(prow);
    }
    all.push_back(std::move(t));
  }
  if (!s) {
    std::cerr << "zb_plan: " << s.message() << "\n";
    return 2;
  }

  nlohmann::ordered_json doc;
  for (const Tables& t : all) {
    layout.slots = t.slots;
    std::cout << zb::format_plan_header(layout);
    std::vector<zb::PlanRow> rows;
    std::vector<zb::PipelinePlanRow> pipeline;
    for (size_t i = 0; i < t.rows.size(); ++i) {
      std::cout << zb::format_plan_table(t.rows[i]) << zb::format_pipeline_table(t.pipeline[i]);
      rows.insert(rows.end(), t.rows[i].begin(), t.rows[i].end());
      pipeline.insert(pipeline.end(), t.pipeline[i].begin(), t.pipeline[i].end());
    }
    nlohmann::ordered_json part = zb::plan_json(layout, rows);
    if (offload)
      for (auto& row : part["rows"]) row["slots"] = t.slots;  // rows of every slot count side by side
    if (doc.is_null()) {
      doc = part;
      if (offload) doc["model"]["slots"] = slot_counts;
    } else {
      for (auto& row : part["rows"]) doc["rows"].push_back(row);
    }
    // The pipeline rows do not depend on the offload slots: once.
    if (!pipeline.empty() && !doc.contains("pipeline")) doc["pipeline"] = zb::pipeline_plan_json(pipeline);
  }
  if (priced)
    std::cout << "\nrequired Gbit/s: the slowest link between nodes at which exposed communication stays within "
              << o.exposed_limit * 100 << "% of the step, for " << o.compute << " per layer over " << o.layers
              << " layers, collectives priced from " << o.sweep << " as zb_predict prices them"
              << (o.node_links > 0 ? ", " + std::to_string(o.node_links) + " link(s) per node (--node-links)" : "")
              << (tiers.inter.ok() ? "; n/a: one node, or no rate suffices"
                                   : "; n/a everywhere: the sweep ran within one node, so it has no link between "
                                     "nodes to model (sweep across nodes)")
              << "\n";
  std::cout.flush();
  if (!o.json_path.empty()) {
    // What each stage shards and moves, as in every results file.
    doc["context"] = {{"stage_table", zb::stage_table_json()}};
    s = zb::write_file_atomically(o.json_path, doc.dump(2) + "\n");
    if (!s) {
      std::cerr << "zb_plan: " << s.message() << "\n";
      return 1;
    }
  }
  return 0;
}
