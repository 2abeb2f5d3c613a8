// zb_plan: memory and DP traffic per GPU for a model and a TP/PP/EP/DP layout, running nothing.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/files.h"
#include "harness/driver/flags.h"
#include "harness/plan/pipeline_formula.h"
#include "harness/plan/pipeline_plan.h"
#include "harness/plan/plan.h"

namespace {

struct Options {
  double params = 0;
  std::string dp_text, json_path;
  int64_t world = 0, tp = 1, pp = 1, ep = 1, dp_per_node = 0;
  int64_t microbatches = 0, chunks = 1;  // pipeline rows when microbatches > 0
  zb::Offload offload = zb::Offload::none;
  int64_t slots = 2;
  double expert_fraction = 0, bucket_mb = 0;
  zb::Optimizer optimizer = zb::Optimizer::adam;
  zb::DType grad_dtype = zb::DType::bf16;
  std::vector<zb::Stage> stages = zb::all_stages();
};

zb::Status parse_dp_list(const std::string& text, std::vector<int64_t>* out) {
  for (const std::string& item : zb::split(text, ',')) {
    int64_t v = 0;
    if (!zb::parse_int(item, &v) || v < 1 || v > zb::kMaxDegree)
      return zb::Status::error("--dp: '" + item + "' is not a degree in [1, " +
                               std::to_string(zb::kMaxDegree) +
                               "]; give N or a comma list like 1,2,4,8");
    for (int64_t seen : *out)
      if (seen == v) return zb::Status::error("--dp: " + item + " given twice");
    out->push_back(v);
  }
  if (out->empty()) return zb::Status::error("--dp needs a value, e.g. --dp=8 or --dp=1,2,4,8");
  return zb::Status::ok();
}

// The dp degrees to plan: from --dp, from --world, or from both when they agree.
zb::Status resolve_dps(const Options& o, std::vector<int64_t>* dps) {
  if (o.dp_text.empty() && o.world == 0)
    return zb::Status::error("needs --dp=N (or a list 1,2,4,...) or --world=W; see --help");
  if (!o.dp_text.empty()) ZB_RETURN_IF_ERROR(parse_dp_list(o.dp_text, dps));
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
  flags.add_double("params", &o.params, "parameters in the whole model, e.g. 7e9", 1, 1e18);
  flags.add_string("dp", &o.dp_text, "data-parallel degree N, or a list 1,2,4,8 for a curve");
  flags.add_int("world", &o.world, "world size; must equal tp*pp*dp (gives dp when --dp is absent)",
                1, int64_t(1) << 60);
  flags.add_int("tp", &o.tp, "tensor-parallel degree", 1, zb::kMaxDegree);
  flags.add_int("pp", &o.pp, "pipeline-parallel degree", 1, zb::kMaxDegree);
  flags.add_int("ep", &o.ep, "expert-parallel degree, carved out of dp (must divide dp)", 1,
                zb::kMaxDegree);
  flags.add_int("dp-per-node", &o.dp_per_node,
                "data-parallel ranks on one node: what hsdp shards over and hpz keeps its node copy "
                "over (default 0: gcd(dp, 8), one 8-GPU node's share)", 0, zb::kMaxDegree);
  flags.add_double("expert-fraction", &o.expert_fraction,
                   "share of params in expert weights (split over ep)", 0, 1);
  flags.add_choice("optimizer", &o.optimizer, "adam (12 bytes/param) or momentum (8)",
                   zb::optimizer_choices());
  flags.add_choice("grad-dtype", &o.grad_dtype, "gradient dtype", zb::dtype_choices());
  flags.add_list("stages", &o.stages, "stages to plan", zb::stage_choices());
  flags.add_int("microbatches", &o.microbatches,
                "also plan dp, z1 and pipeline ZeRO-2 accumulating M micro-batches per step", 0, 1 << 20);
  flags.add_double("bucket-mb", &o.bucket_mb,
                   "with --microbatches: z2's slots hold one gradient bucket of this many MiB (at "
                   "most a chunk), as zb_pipeline's, whose buckets round up to whole layers "
                   "(default 0: a whole chunk)", 0, 1 << 20);
  flags.add_int("chunks", &o.chunks,
                "with --microbatches or --offload: model chunks per GPU (a slot holds one)", 1, 1 << 20);
  flags.add_choice("offload", &o.offload,
                   "what lives in host memory: none, grads (the stage's gradient), optimizer (also the "
                   "FP32 master and moments, CPU optimizer), weights (also the BF16 weights, streamed in); "
                   "adds host bytes/param, device bytes/param and PCIe bytes per step to every row",
                   zb::offload_choices());
  flags.add_int("slots", &o.slots, "with --offload: chunk-sized device slots", 1, 1024);
  flags.add_string("json", &o.json_path, "also write the rows as JSON to this path");
  flags.allow_benchmark_flags(false);

  std::vector<std::string> passthrough;
  bool help = false;
  zb::Status s = flags.parse(argc, argv, &passthrough, &help);
  if (help) {
    std::cout << flags.usage();
    return 0;
  }
  if (s && o.params == 0) s = zb::Status::error("needs --params=N (e.g. --params=7e9)");
  std::vector<int64_t> dps;
  if (s) s = resolve_dps(o, &dps);
  std::vector<zb::Stage> piped;
  for (zb::Stage st : o.stages)
    if (zb::is_pipeline_stage(st)) piped.push_back(st);
  const bool offload = o.offload != zb::Offload::none;
  if (s && o.chunks != 1 && o.microbatches == 0 && !offload)
    s = zb::Status::error("--chunks needs --microbatches=M or --offload");
  if (s && o.bucket_mb > 0 && o.microbatches == 0)
    s = zb::Status::error("--bucket-mb sizes the pipeline's slots; it needs --microbatches=M");
  if (s && o.slots != 2 && !offload) s = zb::Status::error("--slots needs --offload=grads|optimizer|weights");
  if (s && o.microbatches > 0 && piped.empty() && !offload)
    s = zb::Status::error("--microbatches plans dp, z1 and z2; --stages names none of them");

  zb::Layout layout;
  layout.params = o.params;
  layout.tp = o.tp, layout.pp = o.pp, layout.ep = o.ep;
  layout.expert_fraction = o.expert_fraction;
  layout.dp_per_node = o.dp_per_node;
  layout.optimizer = o.optimizer;
  layout.grad_dtype = o.grad_dtype;
  layout.offload = o.offload;
  layout.slots = o.slots;
  layout.chunks = o.chunks;
  layout.microbatches = o.microbatches > 0 ? o.microbatches : 1;

  // Every layout is checked before anything is printed, so a bad entry in a
  // --dp list gives one error line and no partial table.
  std::vector<std::vector<zb::PlanRow>> tables;
  std::vector<std::vector<zb::PipelinePlanRow>> pipeline_tables;
  for (int64_t dp : dps) {
    if (!s) break;
    layout.dp = dp;
    s = zb::check_layout(layout);
    if (!s) break;
    std::vector<zb::PlanRow> rows;
    for (zb::Stage st : o.stages) rows.push_back(zb::plan_row(layout, st));
    tables.push_back(rows);
    std::vector<zb::PipelinePlanRow> prow;
    for (zb::Stage st : o.microbatches > 0 ? piped : std::vector<zb::Stage>{})
      prow.push_back(zb::pipeline_plan_row(layout, st, int(o.microbatches), int(o.chunks),
                                           std::floor(o.bucket_mb * 1048576.0 / double(zb::dtype_size(o.grad_dtype)))));
    pipeline_tables.push_back(prow);
  }
  if (!s) {
    std::cerr << "zb_plan: " << s.message() << "\n";
    return 2;
  }

  std::cout << zb::format_plan_header(layout);
  std::vector<zb::PlanRow> all_rows;
  std::vector<zb::PipelinePlanRow> all_pipeline;
  for (size_t i = 0; i < tables.size(); ++i) {
    std::cout << zb::format_plan_table(tables[i]) << zb::format_pipeline_table(pipeline_tables[i]);
    all_rows.insert(all_rows.end(), tables[i].begin(), tables[i].end());
    all_pipeline.insert(all_pipeline.end(), pipeline_tables[i].begin(), pipeline_tables[i].end());
  }
  std::cout.flush();
  if (!o.json_path.empty()) {
    nlohmann::ordered_json doc = zb::plan_json(layout, all_rows);
    if (!all_pipeline.empty()) doc["pipeline"] = zb::pipeline_plan_json(all_pipeline);
    s = zb::write_file_atomically(o.json_path, doc.dump(2) + "\n");
    if (!s) {
      std::cerr << "zb_plan: " << s.message() << "\n";
      return 1;
    }
  }
  return 0;
}
