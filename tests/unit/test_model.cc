// Model sizes, the padded flat layout, compute specs and the overlap formula.
#include <gtest/gtest.h>

#include "harness/stage/layer_compute.h"
#include "harness/stage/model.h"
#include "harness/stage/overlap.h"

TEST(Model, UniformSpreadsTheRemainder) {
  zb::ModelSpec m;
  ASSERT_TRUE(zb::make_model("", 100003, 5, &m));
  ASSERT_EQ(m.layers.size(), 5u);
  EXPECT_EQ(m.params(), 100003u);
  EXPECT_EQ(m.layers[0].params, 20001u);
  EXPECT_EQ(m.layers[4].params, 20000u);
}

TEST(Model, GptHasRealUnequalLayers) {
  zb::ModelSpec m;
  ASSERT_TRUE(zb::make_model("gpt:layers=2,hidden=64,vocab=1000", 0, 0, &m));
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[0].params, 64000u);                 // embedding V x H
  EXPECT_EQ(m.layers[1].params, 12u * 64 * 64 + 13 * 64);  // block
  EXPECT_EQ(m.layers[3].params, 64000u + 128);           // head and final norm
  EXPECT_EQ(m.layers[1].matrices.size(), 4u);
  EXPECT_TRUE(m.layers[0].matrices.empty());
}

TEST(Model, BucketElementsAreWholeAndAtLeastOne) {
  EXPECT_EQ(zb::bucket_elems(25, zb::DType::bf16), 25u << 19);
  EXPECT_EQ(zb::bucket_elems(25, zb::DType::f32), 25u << 18);
  EXPECT_EQ(zb::bucket_elems(0.05, zb::DType::bf16), 26214u);  // 52428.8 bytes: whole elements
  EXPECT_EQ(zb::bucket_elems(1e-9, zb::DType::f32), 1u);
}

TEST(Model, BadSpecsAreErrors) {
  zb::ModelSpec m;
  EXPECT_FALSE(zb::make_model("llama:layers=2", 0, 0, &m));
  EXPECT_FALSE(zb::make_model("gpt:layers=2,hidden=64", 0, 0, &m));
  EXPECT_FALSE(zb::make_model("gpt:layers=2,hidden=0,vocab=5", 0, 0, &m));
  EXPECT_FALSE(zb::make_model("", 10, 11, &m));
  EXPECT_FALSE(zb::make_model("", 0.5, 1, &m));
}

TEST(Layout, UnitsArePaddedToEqualShards) {
  zb::ModelSpec m;
  ASSERT_TRUE(zb::make_model("", 1003, 4, &m));  // layers of 251, 251, 251, 250
  zb::FlatLayout per_layer = zb::make_layout(m, 0, 3, 3);
  ASSERT_EQ(per_layer.units.size(), 4u);
  uint64_t offset = 0;
  for (const auto& u : per_layer.units) {
    EXPECT_EQ(u.offset, offset);
    EXPECT_EQ(u.padded % 3, 0u);
    EXPECT_LT(u.padded - u.params, 3u);
    offset += u.padded;
  }
  EXPECT_EQ(per_layer.params, 1003u);
  EXPECT_EQ(per_layer.padded, offset);
  EXPECT_EQ(per_layer.padding(), per_layer.padded - 1003);
  EXPECT_EQ(per_layer.shard() * 3, per_layer.padded);
  // Rank 2's block of unit 1 starts two blocks in; in its shard it follows unit 0's block.
  const auto& u1 = per_layer.units[1];
  EXPECT_EQ(per_layer.own_offset(u1, 2), u1.offset + 2 * u1.padded / 3);
  EXPECT_EQ(per_layer.shard_offset(u1), per_layer.units[0].padded / 3);
}

TEST(Layout, BucketsHoldWholeLayersFromTheBack) {
  zb::ModelSpec m;
  ASSERT_TRUE(zb::make_model("", 1000, 10, &m));  // 100 each
  zb::FlatLayout lay = zb::make_layout(m, 250, 2, 1);
  // From the last layer: 7-9 (300), 4-6 (300), 1-3 (300), 0 (100).
  ASSERT_EQ(lay.units.size(), 4u);
  EXPECT_EQ(lay.units[0].first_layer, 0);
  EXPECT_EQ(lay.units[0].end_layer, 1);
  EXPECT_EQ(lay.units[3].first_layer, 7);
  EXPECT_EQ(lay.units[3].end_layer, 10);
  EXPECT_EQ(lay.padding(), 0u);  // plain dp pads nothing
  EXPECT_EQ(lay.layer_unit[5], 2);
  EXPECT_EQ(lay.layer_offset[5], 500u);
}

TEST(ComputeSpec, ParsesEveryKindAndRejectsTheRest) {
  zb::ComputeSpec s;
  ASSERT_TRUE(zb::parse_compute_spec("none", &s));
  EXPECT_EQ(s.kind, zb::ComputeSpec::Kind::none);
  ASSERT_TRUE(zb::parse_compute_spec("sleep:250", &s));
  EXPECT_EQ(s.kind, zb::ComputeSpec::Kind::sleep);
  EXPECT_DOUBLE_EQ(s.seconds, 250e-6);
  ASSERT_TRUE(zb::parse_compute_spec("spin:1.5", &s));
  EXPECT_EQ(s.kind, zb::ComputeSpec::Kind::spin);
  ASSERT_TRUE(zb::parse_compute_spec("gemm:128", &s));
  EXPECT_EQ(s.tokens, 128);
  for (const char* bad : {"", "sleep", "sleep:-1", "spin:x", "gemm:0", "gemm:1.5", "fma:3"})
    EXPECT_FALSE(zb::parse_compute_spec(bad, &s)) << bad;
}

TEST(Overlap, EfficiencyFollowsItsDefinition) {
  // (exposed, comm, compute). Fully hidden: nothing exposed.
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(0.0, 4.0, 10.0), 1.0);
  // Serial: all of the communication exposed.
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(4.0, 4.0, 10.0), 0.0);
  // Half of the shorter side hidden.
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(2.0, 4.0, 10.0), 0.5);
  // Compute the shorter side: at most all of it can hide communication.
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(6.0, 10.0, 4.0), 1.0);
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(8.0, 10.0, 4.0), 0.5);
  // Clipped to [0, 1] against noise either way, and 0 with nothing to overlap.
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(-1.0, 4.0, 10.0), 1.0);
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(5.0, 4.0, 10.0), 0.0);
  EXPECT_DOUBLE_EQ(zb::overlap_efficiency(1.0, 0.0, 5.0), 0.0);
}
