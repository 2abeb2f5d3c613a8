// Model: layer sizes from flags, and the padded flat layout of units.
#include "harness/stage/model.h"

#include <algorithm>
#include <cmath>

#include "harness/core/parse.h"

namespace zb {

uint64_t bucket_elems(double mib, DType grad) {
  if (!(mib > 0)) return 0;
  return std::max<uint64_t>(1, uint64_t(mib * 1048576.0 / double(dtype_size(grad))));
}

uint64_t ModelSpec::params() const {
  uint64_t n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}

static Status parse_gpt(const std::string& spec, ModelSpec* out) {
  int64_t layers = 0, hidden = 0, vocab = 0;
  for (const auto& kv : split(spec, ',')) {
    size_t eq = kv.find('=');
    int64_t v = 0;
    if (eq == std::string::npos || !parse_int(kv.substr(eq + 1), &v) || v < 1)
      return Status::error("--model=gpt: '" + kv + "' is not key=positive integer");
    std::string k = kv.substr(0, eq);
    if (k == "layers") layers = v;
    else if (k == "hidden") hidden = v;
    else if (k == "vocab") vocab = v;
    else return Status::error("--model=gpt: unknown key '" + k + "' (use layers, hidden, vocab)");
  }
  if (!layers || !hidden || !vocab)
    return Status::error("--model=gpt needs layers=L,hidden=H,vocab=V");
  uint64_t h = uint64_t(hidden), v = uint64_t(vocab);
  out->layers.push_back({"embedding", v * h, {}});  // a lookup: no matrix product
  for (int64_t i = 0; i < layers; ++i)
    out->layers.push_back({"block" + std::to_string(i), 12 * h * h + 13 * h,
                           {{h, 3 * h}, {h, h}, {h, 4 * h}, {4 * h, h}}});
  out->layers.push_back({"head", v * h + 2 * h, {{h, v}}});
  out->description = "gpt:" + spec;
  return Status::ok();
}

Status make_model(const std::string& model, double params, int64_t layers, ModelSpec* out) {
  *out = ModelSpec();
  if (!model.empty()) {
    if (model.rfind("gpt:", 0) != 0)
      return Status::error("--model='" + model + "' is not known; use gpt:layers=L,hidden=H,vocab=V");
    return parse_gpt(model.substr(4), out);
  }
  if (!(params >= 1) || params != std::floor(params) || params > 1e13)
    return Status::error("--params must be a whole number of parameters >= 1, e.g. 7e9");
  uint64_t total = uint64_t(params), n = uint64_t(layers);
  if (layers < 1 || n > total)
    return Status::error("--layers must be between 1 and --params");
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t p = total / n + (i < total % n ? 1 : 0);
    uint64_t h = std::max<uint64_t>(1, uint64_t(std::sqrt(double(p))));
    out->layers.push_back({"layer" + std::to_string(i), p, {{h, std::max<uint64_t>(1, p / h)}}});
  }
  out->description = "uniform:params=" + std::to_string(total) + ",layers=" + std::to_string(n);
  return Status::ok();
}

FlatLayout make_layout(const ModelSpec& model, uint64_t bucket_elems, int ranks, int pad_to) {
  FlatLayout lay;
  lay.ranks = ranks;
  int nl = int(model.layers.size());
  // Group layers into units from the last layer back, the order backward produces them.
  std::vector<std::pair<int, int>> groups;  // [first, end)
  int end = nl;
  uint64_t acc = 0;
  for (int l = nl - 1; l >= 0; --l) {
    acc += model.layers[size_t(l)].params;
    if (bucket_elems == 0 || acc >= bucket_elems || l == 0) {
      groups.push_back({l, end});
      end = l;
      acc = 0;
    }
  }
  lay.layer_offset.assign(size_t(nl), 0);
  lay.layer_unit.assign(size_t(nl), 0);
  uint64_t offset = 0, p = uint64_t(pad_to);
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) {
    Unit u{offset, 0, 0, it->first, it->second};
    for (int l = u.first_layer; l < u.end_layer; ++l) {
      lay.layer_offset[size_t(l)] = offset + u.params;
      lay.layer_unit[size_t(l)] = int(lay.units.size());
      u.params += model.layers[size_t(l)].params;
    }
    u.padded = (u.params + p - 1) / p * p;
    lay.units.push_back(u);
    offset += u.padded;
    lay.params += u.params;
  }
  lay.padded = offset;
  return lay;
}

}  // namespace zb
