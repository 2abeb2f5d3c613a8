// zb_predict: each ZeRO stage's step predicted from a zb_collectives sweep: the step's own
// schedule, recorded rather than run, replayed on a compute engine and a communication stream
// whose collectives take what the sweep measured. Benchmarks carry the names of the zb_zero
// benchmarks they predict, so the two results files pair up.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "bench/bench_names.h"
#include "bench/predict_bench.h"
#include "harness/core/files.h"
#include "harness/driver/driver.h"
#include "harness/driver/model_flags.h"
#include "harness/driver/table.h"
#include "harness/plan/pipeline_formula.h"
#include "harness/predict/kernel_rates.h"
#include "harness/predict/link_rate.h"
#include "harness/predict/replay.h"
#include "harness/predict/results.h"
#include "harness/predict/tiers.h"

namespace {

struct Options {
  std::string sweep, compute = "none", trace, measured, link_gbps, kernels;
  std::vector<int64_t> microbatches;  // empty: zb_zero's steps
  int64_t ranks = 0, prefetch = 1, pp = 2, pp_rank = 0, node_links = 0;
  double handoff_us = zb::kDefaultHandoffUs, exposed_limit = zb::kDefaultExposedLimit;
  bool overlap = true, explain = false;
};

struct Row {
  std::string stage;
  zb::PredictOutcome o;
  const std::map<std::string, double>* measured;
};

// Whether the host ran the sweep at one speed and each measured step at that speed, by their
// reference collectives (Driver::time_reference); nothing where the sweep timed none.
void print_host_speed(const zb::HostReference& swept, const std::vector<Row>& rows) {
  if (!std::isfinite(swept.median_s)) return;
  std::string other;  // the steps measured at another speed
  for (const Row& row : rows) {
    const double r = row.measured && row.measured->count("reference_s") ? row.measured->at("reference_s") : NAN;
    if (std::isfinite(r) && !zb::same_host_speed(r, swept.median_s))
      other += (other.empty() ? "" : ", ") + row.stage + " " + zb::fmt(r / swept.median_s, 2) + "x";
  }
  std::printf("# host: the reference collective (the library's %zu MiB all-reduce) took %.3f ms in the sweep, its "
              "median over %d benchmarks; %d of them more than %gx away%s%s\n",
              zb::kReferenceBytes >> 20, swept.median_s * 1e3, swept.benchmarks, swept.off, zb::kHostChangedRatio,
              swept.steady() ? "" : ": the host changed speed during the sweep, so it prices two hosts at once",
              other.empty() ? ""
                            : ("; steps measured at another speed (reference_ratio): " + other +
                               ", so their errors compare two hosts, not the model")
                                  .c_str());
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The trace zb_zero wrote for `stage` with --trace=PATH (PATH_<stage>.json, or PATH itself
// for one stage), as given or beside the results file; empty when it wrote none.
std::string measured_trace(const zb::Results& measured, const std::string& measured_path, const std::string& stage) {
  const std::string& cmd = measured.context.count("command_line") ? measured.context.at("command_line") : "";
  const size_t at = cmd.find("--trace=");
  if (at == std::string::npos) return "";
  const std::string path = cmd.substr(at + 8, cmd.find(' ', at) - at - 8);
  const size_t slash = measured_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : measured_path.substr(0, slash);
  for (const std::string& p : {zb::per_stage_path(path, stage, 2), path}) {
    if (exists(p)) return p;
    const std::string beside = dir + "/" + p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1);
    if (exists(beside)) return beside;
  }
  return "";
}

zb::Status parse_rates(const std::string& text, std::vector<double>* out) {
  std::vector<std::string> items = zb::split(text, ',');
  if (!text.empty() && text.back() == ',') items.push_back("");  // split drops a last empty item
  for (const std::string& item : items) {
    double g = 0;
    if (!zb::parse_double(item, &g) || !(g > 0) || g > zb::kMaxLinkGbps)
      return zb::Status::error("--link-gbps=" + text + ": '" + item + "' is not a rate in (0, 1e5] Gbit/s");
    out->push_back(g);
  }
  return zb::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_predict",
                    "Each stage's step predicted from a zb_collectives sweep: its collectives from "
                    "the step's own schedule, their times from the sweep, overlap from the "
                    "schedule's dependencies. Runs as one process; --ranks sets the modelled N.");
  driver.set_default_iterations(1, 0);
  driver.model_nodes_only();
  Options opt;
  auto& f = driver.flags();
  f.add_string("sweep", &opt.sweep, "the collective sweep (required): zb_collectives results or nccl-tests' -J "
               "JSON (all_reduce_perf, reduce_scatter_perf, all_gather_perf), one file or several, comma-separated");
  f.add_int("ranks", &opt.ranks, "data-parallel ranks to predict for (default: the sweep's); collectives over "
            "more ranks than swept are priced from each tier's fitted link", 0, 1 << 20);
  f.add_double("handoff-us", &opt.handoff_us, "microseconds a blocking wait pays after its collective ends, where "
               "the sweep did not time it (nccl-tests never does; zb_collectives does with --serial)", 0, 1e6);
  f.set_default_text("handoff-us", zb::fmt(zb::kDefaultHandoffUs, 0));
  f.add_string("link-gbps", &opt.link_gbps, "predict with the links between nodes at each of these rates, Gbit/s "
               "(a list 10,25,100): a benchmark per rate, the fitted latency kept");
  f.add_int("node-links", &opt.node_links, "links each node has to the others: 0, one per rank (a NIC per GPU); "
            "fewer, and a node's ranks share them where each runs a collective across nodes at once (hsdp's "
            "all-reduce across nodes), the sweep's run as shared as its nodes were", 0, 1 << 20);
  f.add_double("exposed-limit", &opt.exposed_limit, "required_link_gbps: the share of the step exposed "
               "communication may take", 1e-6, 1);
  f.set_default_text("exposed-limit", zb::fmt(zb::kDefaultExposedLimit, 2));
  f.add_bool("explain", &opt.explain, "with --measured: line every predicted collective and wait up against the "
             "measured step's trace (zb_zero --trace) and name the largest differences");
  zb::ModelFlagSpec spec;
  spec.chunks = true;
  spec.chunks_default = 2;
  spec.stages_help = "stages to predict";
  spec.quantize = true;
  zb::ModelFlags model_flags(f, spec);
  f.add_string("compute", &opt.compute, "per-layer compute: none, sleep:US or spin:US (forward; "
               "backward twice as long), as zb_zero takes it");
  f.add_choice("overlap", &opt.overlap, "off: every collective serialised after the compute it follows",
               zb::Choices<bool>{{"on", true}, {"off", false}});
  f.add_int("prefetch", &opt.prefetch, "z3: layers all-gathered ahead of the one computing", 0, 64);
  f.add_string("trace", &opt.trace, "write the predicted step as a Chrome trace here (PATH_<stage> for several)");
  f.add_ints("microbatches", &opt.microbatches, "predict zb_pipeline's steps instead: micro-batches per step, "
             "M or a list 1,2,4,8 (--stages then takes dp, z1, z2)", 1, 4096);
  f.add_int("pp", &opt.pp, "pipeline: pipeline ranks P", 1, 1024);
  f.add_int("pp-rank", &opt.pp_rank, "pipeline: the pipeline rank p every data-parallel rank plays", 0, 1023);
  f.add_string("kernels", &opt.kernels, "zb_optimizer results (--parts=quantize,kernels): the rates that price "
               "a quantized configuration's kernels (needed for --quantize-weights, --quantize-grads and zpp), "
               "and each step's synthetic gradient and optimizer update");
  f.add_string("measured", &opt.measured, "zb_zero results JSON of the same configuration: report each "
               "prediction's error against the measured step");
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;

  zb::ModelSetup ms;
  zb::ComputeSpec compute;
  zb::Sweep sweep;
  zb::Status s = opt.sweep.empty() ? zb::Status::error("needs --sweep=PATH, zb_collectives results or nccl-tests' -J JSON")
                                   : zb::Sweep::load(opt.sweep, opt.handoff_us * 1e-6, &sweep);
  if (s) s = model_flags.resolve(&ms);
  if (s) s = zb::parse_compute_spec(opt.compute, &compute);
  if (s && compute.kind == zb::ComputeSpec::Kind::gemm)
    s = zb::Status::error("--compute=gemm cannot be predicted (its time is the GPU's); use sleep:US or spin:US");
  const int ranks = opt.ranks ? int(opt.ranks) : sweep.ranks();
  std::vector<double> rates;
  if (s && !opt.link_gbps.empty()) s = parse_rates(opt.link_gbps, &rates);
  if (s && opt.explain && opt.measured.empty())
    s = zb::Status::error("--explain lines the prediction up against a measured step: give --measured=zero.json too");
  if (s && !opt.trace.empty()) s = zb::check_output_path("--trace", opt.trace);
  for (int64_t m : opt.microbatches) {
    if (s) s = zb::check_pipeline({int(m), ms.chunks, int(opt.pp), int(opt.pp_rank)});
    for (zb::Stage st : ms.stages)
      if (s && !zb::is_pipeline_stage(st))
        s = zb::Status::error(std::string("--stages: ") + zb::stage_name(st) + " has no pipeline form; use dp, z1, z2");
  }
  zb::Results measured;
  if (s && !opt.measured.empty()) s = zb::load_results(opt.measured, "--measured", &measured);
  // The nodes modelled: as declared, else the sweep's own shape (one node when it ran on one).
  const int per_node = driver.ranks_per_node() > 0 ? int(driver.ranks_per_node())
                       : sweep.nodes() > 1       ? sweep.ranks_per_node()
                                                 : ranks;
  zb::Topology topo;
  if (s) s = zb::modelled_topology(ranks, per_node, &topo);
  const zb::Tiers tiers = zb::fit_tiers(sweep, int(opt.node_links));
  if (s && !rates.empty() && topo.nodes < 2)
    s = zb::Status::error("--link-gbps sets the links between nodes, and the " + std::to_string(ranks) +
                          " ranks modelled are on one node: give --ranks-per-node below --ranks");
  if (s && !rates.empty() && !tiers.can_price_inter())
    s = zb::Status::error("--link-gbps needs a sweep over more than one rank, to fit the links' latency to");
  bool any_quantized = false;
  for (zb::Stage st : ms.stages)
    for (const zb::Quantization& q : ms.quantizations(st)) any_quantized |= zb::stage_model(st).effective(q).any();
  if (s && any_quantized && !opt.microbatches.empty())
    s = zb::Status::error("--microbatches predicts zb_pipeline's steps, which quantize nothing");
  zb::KernelRates kernels;
  if (s && any_quantized && opt.kernels.empty())
    s = zb::Status::error("a quantized configuration needs --kernels=FILE (zb_optimizer --parts=quantize "
                          "results) to price its quantization kernels");
  if (s && !opt.kernels.empty()) s = zb::KernelRates::load(opt.kernels, &kernels);
  if (s && opt.explain && !opt.microbatches.empty())
    s = zb::Status::error("--explain lines up zb_zero's steps against their traces; not with --microbatches");
  // Each stage's measured trace, found before MPI starts so that a missing one is bad input.
  std::map<zb::Stage, std::string> explain_traces;
  for (zb::Stage st : ms.stages) {
    if (!s || !opt.explain) break;
    std::string& path = explain_traces[st] = measured_trace(measured, opt.measured, zb::stage_name(st));
    if (path.empty())
      s = zb::Status::error("--explain: " + opt.measured + " names no trace of " + zb::stage_name(st) +
                            " that can be read; run zb_zero with --trace=PATH");
  }
  if (!s) return driver.bad_flag(s);
  code = driver.start();
  if (code >= 0) return code;
  const zb::ModelSpec& model = ms.model;
  const zb::Optimizer optimizer = ms.step.optimizer.kind;
  const zb::DType grad_dtype = ms.step.grad_dtype;
  std::vector<int> microbatches(opt.microbatches.begin(), opt.microbatches.end());

  zb::PredictSetup base;
  base.model = &model;
  base.sweep = &sweep;
  base.tiers = &tiers;
  base.exposed_limit = opt.exposed_limit;
  base.compute = compute;
  base.topo = topo;
  base.config = ms.step;
  base.config.overlap = opt.overlap;
  base.config.prefetch = int(opt.prefetch);
  base.kernels = &kernels;
  std::vector<Row> rows;
  const std::string overlap = opt.overlap ? "on" : "off";
  // One prediction per stage (and per M for the pipeline), named as the benchmark it predicts.
  // With --link-gbps, one per rate, named with the rate after the measured benchmark's name.
  auto add = [&](zb::PredictSetup setup, const std::string& name, const std::string& label) {
    auto found = measured.benchmarks.find(name);
    if (found != measured.benchmarks.end()) setup.measured = &found->second;
    for (double rate : rates.empty() ? std::vector<double>{NAN} : rates) {
      setup.link_gbps = rate;
      char text[32];  // the rate as given, to 6 significant digits: 0.25, 2.5, 400
      std::snprintf(text, sizeof text, "%g", rate);
      const std::string tail = std::isnan(rate) ? "" : std::string("/link_gbps:") + text;
      driver.add(name + tail, [&, setup, label, tail](zb::Run& run) -> zb::Status {
        zb::PredictOutcome o;
        ZB_RETURN_IF_ERROR(zb::run_predict_benchmark(run, setup, &o));
        rows.push_back({label + tail, o, setup.measured});
        return zb::Status::ok();
      });
    }
  };
  size_t count = 0;
  for (zb::Stage st : ms.stages) count += ms.quantizations(st).size() * std::max<size_t>(1, microbatches.size());
  for (zb::Stage st : ms.stages) {
    zb::PredictSetup setup = base;
    setup.config.stage = st;
    const std::string stage = zb::stage_name(st);
    if (microbatches.empty()) {
      // Each quantized configuration as zb_zero names it, beside the stage unquantized.
      for (const zb::Quantization& q : ms.quantizations(st)) {
        zb::PredictSetup config = setup;
        config.config.quant = q;
        config.trace_path = zb::per_stage_path(opt.trace, zb::config_file_label(st, q), count);
        if (opt.explain) config.explain_trace = explain_traces.at(st);
        add(config, zb::zero_benchmark_name(st, model, optimizer, grad_dtype, opt.compute, opt.overlap, q),
            zb::config_label(st, q));
      }
      continue;
    }
    for (int m : microbatches) {
      setup.pipeline = true;
      setup.pipeline_config.stage = st;
      setup.pipeline_config.optimizer = setup.config.optimizer;
      setup.pipeline_config.grad_dtype = grad_dtype;
      setup.pipeline_config.bucket_elems = setup.config.bucket_elems;
      setup.pipeline_config.shape = {m, ms.chunks, int(opt.pp), int(opt.pp_rank)};
      const std::string label = stage + " M=" + std::to_string(m);
      setup.trace_path = zb::per_stage_path(opt.trace, stage + "_m" + std::to_string(m), count);
      add(setup, zb::pipeline_benchmark_name(st, model, setup.pipeline_config.shape, optimizer, grad_dtype,
                                             opt.compute),
          label);
    }
  }

  // The share behind required_link_gbps, for whoever reads the results rather than the console.
  driver.context("exposed_limit", zb::fmt(opt.exposed_limit, 6));
  // Whether the sweep ran at one host speed (host_steady is 0 for every stage where not).
  const zb::HostReference& ref = sweep.reference();
  if (std::isfinite(ref.median_s))
    driver.context("sweep_host_speed", std::string(ref.steady() ? "steady" : "changed") + ": the reference " +
                                           "collective " + zb::fmt(ref.median_s * 1e3, 3) + " ms, the median over " +
                                           std::to_string(ref.benchmarks) + " benchmarks, " +
                                           std::to_string(ref.off) + " of them more than " +
                                           zb::fmt(zb::kHostChangedRatio, 1) + "x away");
  code = driver.run();
  if (driver.root() && !rows.empty()) {
    std::string handoff = sweep.handoff_defaulted()
                              ? "hand-off " + zb::fmt(opt.handoff_us, 1) + " us per blocking wait (--handoff-us) where the sweep timed none"
                              : "hand-off from the sweep's serial_s";
    std::printf("\n# zb_predict: %d ranks on %d node(s), %s, Psi = %.0f, compute %s, overlap %s, sweep %s (%s); %s\n",
                ranks, topo.nodes, model.description.c_str(), double(model.params()), opt.compute.c_str(),
                overlap.c_str(), opt.sweep.c_str(), sweep.description().c_str(), handoff.c_str());
    for (auto [t, link] : {std::pair{zb::Tier::intra, tiers.intra}, std::pair{zb::Tier::inter, tiers.inter}})
      if (link.ok())
        std::printf("# %s links fitted: %.2f us per ring step, %.3f Gbit/s (%d points)\n", zb::tier_name(t),
                    link.alpha_s * 1e6, link.gbps(), link.points);
    if (topo.nodes > 1)
      std::printf("# links between nodes: %s, each carrying %.3g rank(s)' collectives across nodes at once "
                  "(--node-links)\n",
                  opt.node_links ? (std::to_string(opt.node_links) + " per node").c_str() : "one per rank",
                  tiers.sharing(topo.local_size));
    zb::Table table({"stage", "collectives", "comm(ms)", "measured", "compute(ms)", "exposed(ms)", "measured",
                     "per comm", "skew(ms)", "measured", "step(ms)", "required Gbit/s", "beats plain below Gbit/s",
                     "extrapolated", "modelled"});
    for (const auto& [stage, o, m] : rows) {
      const zb::StepPrediction& p = o.p;
      auto at = [&](const char* key) { return m && m->count(key) ? m->at(key) * 1e3 : NAN; };
      table.add_row({stage, std::to_string(p.collectives), zb::fmt(p.comm_s * 1e3, 3), zb::fmt(at("comm_s"), 3),
                     zb::fmt(p.compute_s * 1e3, 3), zb::fmt(p.exposed_s * 1e3, 3), zb::fmt(at("exposed_comm_s"), 3),
                     zb::fmt(o.exposed_per_comm, 2), zb::fmt(p.skew_wait_s * 1e3, 3), zb::fmt(at("skew_wait_s"), 3),
                     zb::fmt(p.step_s * 1e3, 3),
                     zb::fmt(o.required_link_gbps, 3),
                     std::isnan(o.beats_unquantized_below_gbps) ? "-" : zb::fmt(o.beats_unquantized_below_gbps, 3),
                     p.extrapolated ? "yes" : "no", p.modelled ? "yes" : "no"});
    }
    table.print(stdout);
    std::printf("# comm: the step replayed with no compute, its waits and hand-offs included (zb_zero's comm_s); "
                "exposed: time compute waits for communication in the replay (the rank that waits longest); per comm: "
                "its relative change per relative change of every collective's time, replayed %g%% longer "
                "(exposed_per_comm); skew: "
                "of that, waiting for the slowest rank to issue; required: the slowest link between "
                "nodes that keeps exposed communication within %g%% of the step (n/a on one node); beats plain: "
                "the link rate below which a quantized configuration's step is faster than its stage "
                "unquantized; modelled: some collective priced from a tier's fitted link rather than read off "
                "the sweep\n",
                zb::kExposedPerCommStep * 100, opt.exposed_limit * 100);
    if (!kernels.empty())
      std::printf("# kernels priced at zb_optimizer's rates from %s%s; the fastest rank runs them in %.1f%% "
                  "less time than the slowest (rank_spread), so it runs ahead and waits longer\n",
                  kernels.file().c_str(),
                  !kernels.prices_step_kernels() ? ""
                  : sweep.host_cores() > 0
                      ? " (the step's own between their time alone and side by side, by how often the ranks' "
                        "kernels meet on the host's cores)"
                      : " (the step's own at their time side by side, a device each)",
                  kernels.rank_spread() * 100);
    if (!kernels.prices_step_kernels())
      std::printf("# the synthetic backward's gradient and the optimizer's update are not priced: give "
                  "--kernels=FILE (zb_optimizer --parts=kernels)\n");
    const int per_node = topo.size / topo.nodes;
    const zb::HostShare host = zb::host_share(sweep.host_cores(), per_node);
    if (sweep.host_cores() > 0 && host.outnumbered_ranks == 0)
      std::printf("# host: %d cores a node, shared by %d ranks' compute and communication; while compute keeps "
                  "them busy the stream runs at %.2f of its swept speed, at %.2f where half the ranks compute "
                  "(the others behind or ahead)\n",
                  sweep.host_cores(), per_node, host.stream_rate, host.skewed_rate);
    if (host.outnumbered_ranks > 0)
      std::printf("# host: %d cores a node for %d ranks: the ranks outnumber the cores, so the stream moves on "
                  "the cores their compute leaves (the share no rank's busy spell holds, the ranks' spells "
                  "falling apart), a reduction queued behind others meets its gradients cold, and a "
                  "collective they all block on lets them go in waves of %d, the last after the others' busy "
                  "spell (the optimizer's updates); the scheduler's time slices themselves are not priced, so "
                  "the exposed time is rougher than with a core for every rank\n",
                  sweep.host_cores(), per_node, sweep.host_cores());
    if (topo.nodes > 1 && !tiers.inter.ok())
      std::printf("# links between nodes: the sweep ran on one node, so they take its link's latency\n");
    print_host_speed(sweep.reference(), rows);
    for (const auto& [stage, o, m] : rows)
      if (!o.explanation.empty()) std::printf("\n# --explain %s\n%s", stage.c_str(), o.explanation.c_str());
  }
  return code;
}
