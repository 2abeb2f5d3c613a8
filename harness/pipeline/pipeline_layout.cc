// A pipeline rank's share of the model: its chunks' layers, laid out chunk by chunk.
#include "harness/pipeline/pipeline_layout.h"

#include <string>

namespace zb {

Status make_pipeline_layout(const ModelSpec& model, const PipelineShape& shape, uint64_t bucket_elems,
                            int ranks, int pad_to, PipelineLayout* out) {
  const int V = shape.virtual_stages(), L = int(model.layers.size());
  if (L < V)
    return Status::error("the model has " + std::to_string(L) + " layers, fewer than --pp x --chunks = " +
                         std::to_string(V) + " virtual stages; give it more layers");
  *out = PipelineLayout();
  out->virtual_layers = split_layers(L, V);
  FlatLayout& flat = out->flat;
  flat.ranks = ranks;
  for (int c = 0; c < shape.chunks; ++c) {
    const auto [first, end] = out->virtual_layers[size_t(shape.virtual_stage(c))];
    ModelSpec part;
    part.layers.assign(model.layers.begin() + first, model.layers.begin() + end);
    // Each chunk is laid out on its own, so a bucket never holds layers of two chunks.
    FlatLayout sub = make_layout(part, bucket_elems, ranks, pad_to);
    const int local = int(out->layers.size()), unit0 = int(flat.units.size());
    for (Unit u : sub.units) {
      u.offset += flat.padded;
      u.first_layer += local;
      u.end_layer += local;
      flat.units.push_back(u);
    }
    for (size_t l = 0; l < sub.layer_offset.size(); ++l) {
      flat.layer_offset.push_back(sub.layer_offset[l] + flat.padded);
      flat.layer_unit.push_back(sub.layer_unit[l] + unit0);
      out->layers.push_back(first + int(l));
    }
    out->chunk_units.push_back({unit0, int(flat.units.size())});
    flat.params += sub.params;
    flat.padded += sub.padded;
  }
  return Status::ok();
}

}  // namespace zb
