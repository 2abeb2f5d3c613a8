// Model: the parameter counts of a model's layers, and the flat layout ZeRO shards: units
// (gradient buckets, or layers for ZeRO-3) padded so all N shards are equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/status.h"
#include "harness/core/dtype.h"

namespace zb {

struct LayerSpec {
  std::string name;
  uint64_t params;
  // Weight matrices (in x out) every token passes through: what `--compute=gemm` runs.
  std::vector<std::pair<uint64_t, uint64_t>> matrices;
};

struct ModelSpec {
  std::string description;  // "uniform:params=..,layers=.." or "gpt:layers=..,hidden=..,vocab=.."
  std::vector<LayerSpec> layers;
  uint64_t params() const;
};

// `--model=gpt:layers=L,hidden=H,vocab=V`: embedding (V x H), L transformer blocks of
// 12H^2 + 13H (QKV, projection and 4H MLP with biases, two layer norms), and an untied
// head (V x H) with the final layer norm; layers are unequal, as in a real model.
// Empty `model`: `params` split over `layers` equal layers (the remainder spread one
// parameter each over the first layers), each computing as one h x (p/h) matrix, h = sqrt(p).
Status make_model(const std::string& model, double params, int64_t layers, ModelSpec* out);

// Gradient elements in a bucket of `mib` MiB of `grad` gradients (the --bucket-mb flags): at
// least one for any positive size; 0 for 0 (no bucket: a whole chunk, where a caller says so).
uint64_t bucket_elems(double mib, DType grad);

// One collective's slice of the flat vector: `params` real elements of layers
// [first_layer, end_layer), then padding up to `padded`, a multiple of the rank count.
struct Unit {
  uint64_t offset, params, padded;
  int first_layer, end_layer;
};

struct FlatLayout {
  int ranks = 1;
  uint64_t params = 0, padded = 0;     // real and padded totals
  std::vector<Unit> units;             // forward order, contiguous
  std::vector<uint64_t> layer_offset;  // where each layer starts in the flat vector
  std::vector<int> layer_unit;

  uint64_t padding() const { return padded - params; }
  // Elements one rank owns: 1/N of every unit.
  uint64_t shard() const { return padded / uint64_t(ranks); }
  uint64_t block(const Unit& u) const { return u.padded / uint64_t(ranks); }
  // Where this rank's block of `u` sits in the flat vector, and in the rank's own shard.
  uint64_t own_offset(const Unit& u, int rank) const { return u.offset + uint64_t(rank) * block(u); }
  uint64_t shard_offset(const Unit& u) const { return u.offset / uint64_t(ranks); }
};

// Units are buckets of whole layers filled in backward order until they reach
// `bucket_elems` (Megatron's grad buckets), or one unit per layer when `bucket_elems` is 0
// (ZeRO-3 gathers layer by layer). `pad_to` is the rank count for sharded stages and 1 for
// plain dp, which shards nothing.
FlatLayout make_layout(const ModelSpec& model, uint64_t bucket_elems, int ranks, int pad_to);

}  // namespace zb
