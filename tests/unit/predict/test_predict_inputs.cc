// What the replay reads besides the sweep: the step as the recorder logs it (which collectives
// run in place, each kernel with its elements) and the kernels' rates from zb_optimizer's
// results, which price the quantization kernels and the step's own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "harness/predict/kernel_rates.h"
#include "harness/predict/replay.h"

namespace zb {
namespace {

TEST(KernelRates, ReadFromZbOptimizerResults) {
  const std::string path = ::testing::TempDir() + "zb_kernel_rates.json";
  {
    std::ofstream out(path);
    out << R"({"context": {}, "benchmarks": [
      {"name": "quantize/params:1048576/format:int8/block:4096/dtype:bf16/impl:cpu", "params_per_s": 1e8},
      {"name": "quantize/params:4194304/format:int8/block:4096/dtype:bf16/impl:cpu", "params_per_s": 2e8},
      {"name": "quantize/params:16777216/format:int8/block:4096/dtype:f32/impl:cpu", "params_per_s": 9e8},
      {"name": "reduce_requantize/params:4194304/format:int4/block:2048/inputs:8/impl:cpu", "params_per_s": 1e7},
      {"name": "kernel/params:4194304/optimizer:adam/grad:bf16/impl:cpu", "params_per_s": 5}]})";
  }
  KernelRates rates;
  ASSERT_TRUE(KernelRates::load(path, &rates));
  auto op = [](const char* what, const char* format, double elements) {
    ScheduleOp o{ScheduleOp::Kind::compute, what, 0};
    o.format = format, o.elements = elements;
    return o;
  };
  Status missing;
  // BF16 first, then the largest size: 4e8 elements at 2e8 per second.
  EXPECT_DOUBLE_EQ(rates.seconds(op("quantize", "int8", 4e8), &missing), 2);
  // The reduction counts every input: 8 x 1e7 input elements per second.
  EXPECT_DOUBLE_EQ(rates.seconds(op("reduce", "int4", 8e7), &missing), 1);
  EXPECT_TRUE(missing);
  rates.seconds(op("amax", "fp8", 1e6), &missing);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("quantize of fp8"), std::string::npos) << missing.message();
  {
    std::ofstream out(path);
    out << R"({"context": {}, "benchmarks": [{"name": "kernel/params:4/impl:cpu", "params_per_s": 5}]})";
  }
  const Status none = KernelRates::load(path, &rates);
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("--parts=quantize"), std::string::npos) << none.message();
  std::remove(path.c_str());
}

TEST(KernelRates, TheStepsOwnKernelsArePricedAtTheSizeTimedNearestTheirs) {
  const std::string path = ::testing::TempDir() + "zb_step_kernels.json";
  std::ofstream(path) << R"({"context": {}, "benchmarks": [
      {"name": "adam/params:262144/grad:bf16/impl:cpu", "params_per_s": 1e8, "rank_spread": 0.05},
      {"name": "adam/params:1048576/grad:bf16/impl:cpu", "params_per_s": 4e8, "rank_spread": 0.3},
      {"name": "adam/params:1048576/grad:fp32/impl:cpu", "params_per_s": 2e8, "rank_spread": 0.1,
       "side_by_side_s": 0.125},
      {"name": "synthetic_grad/params:1048576/grad:bf16/impl:cpu", "params_per_s": 5e8}]})";
  KernelRates rates;
  ASSERT_TRUE(KernelRates::load(path, &rates));
  EXPECT_TRUE(rates.prices_step_kernels());
  auto op = [](const char* what, const char* format, double elements) {
    ScheduleOp o{ScheduleOp::Kind::compute, what, 0};
    o.format = format, o.elements = elements;
    return o;
  };
  auto alone = [&](const char* what, const char* format, double elements, const char* grad) {
    return rates.step_kernel_time(op(what, format, elements), grad).alone_s;
  };
  auto together = [&](const char* what, const char* format, double elements, const char* grad) {
    return rates.step_kernel_time(op(what, format, elements), grad).together_s;
  };
  // 400000 parameters lie nearer 262144 than 1048576 (by their ratio): 4e-3 s at 1e8 a second.
  EXPECT_DOUBLE_EQ(alone("update", "adam", 4e5, "bf16"), 4e-3);
  EXPECT_DOUBLE_EQ(alone("update", "adam", 8e5, "bf16"), 2e-3);
  // A file without the ranks' time side by side gives the one rate for both.
  EXPECT_DOUBLE_EQ(together("update", "adam", 8e5, "bf16"), 2e-3);
  // Where it has it, side by side at that: 1048576 parameters in 1/8 s; alone at params_per_s.
  EXPECT_DOUBLE_EQ(alone("update", "adam", 8e5, "fp32"), 4e-3);
  EXPECT_DOUBLE_EQ(together("update", "adam", 8e5, "fp32"), 8e5 / (1048576 * 8.0));
  // The ranks differ by the median of the kernels' spreads, 0.1, whichever kernel runs: the
  // fastest rank gains 0.2 ms on a 2 ms gradient, and 0.4 ms on a 4 ms update (compute_cost).
  EXPECT_DOUBLE_EQ(rates.rank_spread(), 0.1);
  EXPECT_DOUBLE_EQ(alone("backward", "bf16", 1e6, "bf16"), 2e-3);
  EXPECT_TRUE(std::isnan(alone("update", "momentum", 1e6, "bf16")));
  EXPECT_TRUE(std::isnan(together("backward", "fp32", 1e6, "fp32")));

  // A step's backward is --compute's time, then its gradient on the host; the update its kernel.
  RecordedStep step;
  step.compute.kind = ComputeSpec::Kind::sleep;
  step.compute.seconds = 0.5;
  step.kernels = &rates;
  Status missing;
  ComputeCost back = compute_cost(step, op("backward", "bf16", 1e6), &missing);
  EXPECT_DOUBLE_EQ(back.layer_s, 1.0);
  EXPECT_DOUBLE_EQ(back.kernel_s, 2e-3);
  EXPECT_DOUBLE_EQ(back.lag_s, 2e-4);
  EXPECT_FALSE(back.layer_busy);  // a sleep leaves the cores to communication
  EXPECT_DOUBLE_EQ(compute_cost(step, op("update", "adam", 8e5), &missing).kernel_s, 2e-3);
  EXPECT_DOUBLE_EQ(compute_cost(step, op("update", "adam", 4e5), &missing).lag_s, 4e-4);
  // On devices (no host cores) an update that has a side-by-side time takes it, and so it does
  // with a core for each rank (no layer: busy throughout, every rank's update meets the
  // others'). Where 4 ranks share 2 cores the updates run in the waves the optimizer's wait
  // lets go, one rank a core: alone (params_per_s, 2e8 a second).
  step.grad_dtype = "fp32";
  step.topo.size = 4;
  EXPECT_DOUBLE_EQ(compute_cost(step, op("update", "adam", 8e5), &missing).kernel_s, 8e5 / (1048576 * 8.0));
  EXPECT_DOUBLE_EQ(compute_cost(step, op("update", "adam", 8e5), &missing, 4).kernel_s, 8e5 / (1048576 * 8.0));
  EXPECT_DOUBLE_EQ(compute_cost(step, op("update", "adam", 8e5), &missing, 2).kernel_s, 4e-3);
  step.grad_dtype = "bf16";
  // Without the rates both are left out, as zb_predict says.
  step.kernels = nullptr;
  EXPECT_DOUBLE_EQ(compute_cost(step, op("backward", "bf16", 1e6), &missing).kernel_s, 0.0);
  EXPECT_TRUE(missing);
  std::remove(path.c_str());
}

// A step kernel where the ranks outnumber the cores: alone 1 s, all 4 ranks at once 3 s, on 2
// cores; with m kernels running one takes 1 s for m <= 2, 2 s at 3 and 3 s at 4. Each other rank
// runs its kernel with the chance u = s / (s + 3) beside a 3 s sleep, so, with k of 3 others
// busy (binomial), the expected time is 1 + 3u^2(1 - u) + 2u^3 = 1 + 3u^2 - u^3 seconds: the
// time returned solves that with its own u.
TEST(KernelRates, AKernelIsSlowerByHowOftenTheOtherRanksKernelsMeetIt) {
  const double s = crowded_kernel_seconds(1, 3, 3, false, 4, 2);
  const double u = s / (s + 3);
  EXPECT_NEAR(s, 1 + 3 * u * u - u * u * u, 1e-12);
  EXPECT_GT(s, 1.2);
  EXPECT_LT(s, 1.25);
  // With as many cores as ranks, a second kernel already shares the memory: 2 ranks on 2 cores
  // take 1 + 2u seconds, u = s / (s + 3), so s^2 + 3s = 3s + 3: the square root of 3.
  EXPECT_NEAR(crowded_kernel_seconds(1, 3, 3, false, 2, 2), std::sqrt(3.0), 1e-12);
  // Busy throughout (no layer, or one that spins): every rank's kernel meets every other's.
  EXPECT_DOUBLE_EQ(crowded_kernel_seconds(1, 3, 0, false, 4, 2), 3);
  EXPECT_DOUBLE_EQ(crowded_kernel_seconds(1, 3, 3, true, 4, 2), 3);
  // Devices (no host cores): side by side, each rank on its own. One rank, or no slower
  // together: alone.
  EXPECT_DOUBLE_EQ(crowded_kernel_seconds(1, 3, 3, false, 4, 0), 3);
  EXPECT_DOUBLE_EQ(crowded_kernel_seconds(1, 3, 3, false, 1, 2), 1);
  EXPECT_DOUBLE_EQ(crowded_kernel_seconds(1, 1, 3, false, 4, 2), 1);
}

// Which of a step's collectives reduce or gather in place, as the recorder logs them: dp's
// all-reduce into the gradients it reads; z1's reduce-scatter into the rank's block of its full
// gradients and z1's and z2's weight gathers from the rank's block of the whole weights. z2's
// and z3's reduce-scatters leave a slot for the sharded gradients, and z3 gathers into a
// transient buffer: out of place.
TEST(Recorder, LogsWhichCollectivesRunInPlace) {
  ModelSpec model;
  ASSERT_TRUE(make_model("", 4096 * 4 * 8, 8, &model));
  Topology topo;
  ASSERT_TRUE(modelled_topology(4, 4, &topo));
  const std::map<Stage, std::map<Coll, bool>> want = {
      {Stage::dp, {{Coll::all_reduce, true}}},
      {Stage::z1, {{Coll::reduce_scatter, true}, {Coll::all_gather, true}}},
      {Stage::z2, {{Coll::reduce_scatter, false}, {Coll::all_gather, true}}},
      {Stage::z3, {{Coll::reduce_scatter, false}, {Coll::all_gather, false}}}};
  for (const auto& [stage, ops] : want) {
    ZeroConfig config;
    config.stage = stage;
    RecordedStep step;
    ASSERT_TRUE(record_zero_step(model, config, ComputeSpec{}, topo, &step));
    std::map<Coll, int> seen;
    for (const CollRecord& c : step.traffic) {
      ASSERT_TRUE(ops.count(c.op)) << stage_name(stage) << " " << coll_name(c.op);
      EXPECT_EQ(c.in_place, ops.at(c.op)) << stage_name(stage) << " " << coll_name(c.op);
      ++seen[c.op];
    }
    EXPECT_EQ(seen.size(), ops.size()) << stage_name(stage);
  }
}

// Which reductions read a buffer an earlier collective of the same step used: dp's and z1's
// buckets are each their own part of the gradients, used once a step; z2's and z3's (and the
// pipeline's z2, in place) alternate between two slots, so every one after the first two
// finds its slot used. In the round with communication alone only the others are cold.
TEST(Recorder, MarksAReductionFromABufferTheStepAlreadyUsed) {
  ModelSpec model;
  ASSERT_TRUE(make_model("", 4096 * 4 * 8, 8, &model));
  Topology topo;
  ASSERT_TRUE(modelled_topology(4, 4, &topo));
  auto reductions = [](const RecordedStep& step) {
    size_t last = 0;
    for (size_t i = 0; i < step.log.ops().size(); ++i)
      if (step.log.ops()[i].kind == ScheduleOp::Kind::step) last = i;
    std::string reused;  // one letter a reduction of the last step: r reused, f fresh
    for (size_t i = last; i < step.log.ops().size(); ++i) {
      const ScheduleOp& o = step.log.ops()[i];
      if (o.kind == ScheduleOp::Kind::issue && o.coll.op != Coll::all_gather) reused += o.coll.reused_buffer ? 'r' : 'f';
    }
    return reused;
  };
  for (Stage stage : {Stage::dp, Stage::z1, Stage::z2, Stage::z3}) {
    ZeroConfig config;
    config.stage = stage;
    config.bucket_elems = 4096 * 4;  // a bucket a layer: 8 reductions
    RecordedStep step;
    ASSERT_TRUE(record_zero_step(model, config, ComputeSpec{}, topo, &step));
    const bool slots = stage == Stage::z2 || stage == Stage::z3;
    EXPECT_EQ(reductions(step), slots ? "ffrrrrrr" : "ffffffff") << stage_name(stage);
  }
  PipelineConfig pipe;
  pipe.bucket_elems = 4096 * 4;
  pipe.shape.microbatches = 2;
  RecordedStep step;
  ASSERT_TRUE(record_pipeline_step(model, pipe, ComputeSpec{}, topo, &step));
  EXPECT_EQ(reductions(step), "ff" + std::string(14, 'r'));  // 8 buckets, each micro-batch
}

// Each collective's reuse distance: the distinct bytes the collectives touched from the last one
// that used its buffer to it. dp all-reduces its 8 buckets in place, so each meets all of the
// gradients since its own bucket's last use; z1 also gathers the 8 layers' weights in place
// between two reductions of a bucket, so both meet gradients and weights. A step's first use
// of a buffer reaches back into the step before; in the first step nothing used it (0).
TEST(Recorder, GivesEachCollectiveItsBuffersReuseDistance) {
  const double params = 4096 * 4 * 8;
  ModelSpec model;
  ASSERT_TRUE(make_model("", params, 8, &model));
  Topology topo;
  ASSERT_TRUE(modelled_topology(4, 4, &topo));
  for (Stage stage : {Stage::dp, Stage::z1}) {
    ZeroConfig config;
    config.stage = stage;
    config.bucket_elems = 4096 * 4;  // a bucket a layer
    RecordedStep step;
    ASSERT_TRUE(record_zero_step(model, config, ComputeSpec{}, topo, &step));
    const uint64_t grads = uint64_t(params) * dtype_size(config.grad_dtype), weights = uint64_t(params) * 2;
    const uint64_t reuse = stage == Stage::dp ? grads : grads + weights;
    int steps = 0, last_step = 0;
    for (const ScheduleOp& o : step.log.ops()) {
      if (o.kind == ScheduleOp::Kind::step) ++steps;
      if (o.kind != ScheduleOp::Kind::issue) continue;
      EXPECT_EQ(o.coll.reuse_bytes, steps == 1 ? 0 : reuse) << stage_name(stage) << " " << coll_name(o.coll.op);
      last_step += steps == 2;
    }
    EXPECT_EQ(last_step, stage == Stage::dp ? 8 : 16) << stage_name(stage);
  }
}

// A quantized step as the recorder logs it: z3 with INT8 gathers on 4 ranks quantizes its
// block of every unit for each of its two gathers (forward, backward) and dequantizes all 4
// blocks after each.
TEST(Recorder, LogsEachKernelOfAQuantizedStepWithItsElements) {
  ModelSpec model;
  ASSERT_TRUE(make_model("", 4096 * 4 * 8, 8, &model));
  ZeroConfig config;
  config.stage = Stage::z3;
  config.quant.weights = WeightQuant::int8;
  Topology topo;
  ASSERT_TRUE(modelled_topology(4, 4, &topo));
  RecordedStep step;
  ASSERT_TRUE(record_zero_step(model, config, ComputeSpec{}, topo, &step));
  double quantized = 0, dequantized = 0, gradients = 0, updated = 0;
  size_t last = 0;
  for (size_t i = 0; i < step.log.ops().size(); ++i)
    if (step.log.ops()[i].kind == ScheduleOp::Kind::step) last = i;
  for (size_t i = last; i < step.log.ops().size(); ++i) {
    const ScheduleOp& o = step.log.ops()[i];
    if (o.what == "backward" || o.what == "update") {
      EXPECT_EQ(o.format, o.what == "backward" ? "bf16" : "adam");
      (o.what == "backward" ? gradients : updated) += o.elements;
    }
    if (!o.quantization_kernel()) continue;
    EXPECT_EQ(o.format, "int8") << o.what;
    (o.what == "quantize" ? quantized : dequantized) += o.elements;
  }
  const double psi = double(model.params());
  EXPECT_DOUBLE_EQ(quantized, 2 * psi / 4);
  EXPECT_DOUBLE_EQ(dequantized, 2 * psi);
  // Besides them, backward writes every gradient and the update covers the rank's quarter.
  EXPECT_DOUBLE_EQ(gradients, psi);
  EXPECT_DOUBLE_EQ(updated, psi / 4);
}

}  // namespace
}  // namespace zb
