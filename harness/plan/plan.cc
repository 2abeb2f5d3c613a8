// Layout planning: validation, per-stage memory and traffic per GPU, table and JSON output.
#include "harness/plan/plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace zb {
namespace {

std::string num(double v) {
  // Shortest text that reads back as the same double, so JSON round-trips.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string degree(const char* name, int64_t v) {
  return std::string("--") + name + "=" + std::to_string(v);
}

}  // namespace

Status dp_from_world(int64_t world, int64_t tp, int64_t pp, int64_t* dp) {
  if (world < 1) return Status::error(degree("world", world) + " must be at least 1");
  if (world % (tp * pp) != 0)
    return Status::error(degree("world", world) + " is not divisible by tp*pp = " +
                         std::to_string(tp * pp) + " (tp=" + std::to_string(tp) +
                         ", pp=" + std::to_string(pp) + "); world must be tp*pp*dp");
  *dp = world / (tp * pp);
  return Status::ok();
}

Status check_layout(const Layout& l) {
  if (!(l.params >= 1) || l.params != std::floor(l.params) || l.params > 1e18)
    return Status::error("--params=" + num(l.params) +
                         " must be a whole number of parameters in [1, 1e18]");
  const std::pair<const char*, int64_t> degrees[] = {
      {"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"ep", l.ep}};
  for (const auto& [name, v] : degrees)
    if (v < 1 || v > kMaxDegree)
      return Status::error(degree(name, v) + " must be in [1, " + std::to_string(kMaxDegree) +
                           "]");
  if (!(l.expert_fraction >= 0 && l.expert_fraction <= 1))
    return Status::error("--expert-fraction=" + num(l.expert_fraction) + " must be in [0, 1]");
  if (l.dp % l.ep != 0)
    return Status::error(degree("ep", l.ep) + " does not divide " + degree("dp", l.dp) +
                         "; EP is carved out of DP, so ep must divide dp");
  // An EP degree with no expert weights splits nothing: almost surely a
  // forgotten --expert-fraction, which would silently plan a dense model.
  if (l.ep > 1 && l.expert_fraction == 0)
    return Status::error(degree("ep", l.ep) +
                         " needs --expert-fraction > 0 (the share of params in experts)");
  const int64_t s = dp_per_node(l);
  if (l.dp_per_node < 0 || l.dp_per_node > kMaxDegree || l.dp % s != 0)
    return Status::error(degree("ranks-per-node", l.dp_per_node) + " must divide " + degree("dp", l.dp) +
                         " (nodes hold whole groups of a dp group's ranks)");
  return Status::ok();
}

int64_t dp_per_node(const Layout& l) { return l.dp_per_node > 0 ? l.dp_per_node : std::gcd(l.dp, int64_t(8)); }

int64_t expert_dp_per_node(const Layout& l) {
  const int64_t s = dp_per_node(l);
  return s % l.ep == 0 ? s / l.ep : 1;
}

// The offload columns of a row, dense and expert parameters each over their own sharding.
static OffloadRow offload_row(const Layout& l, const PlanRow& r, int64_t expert_per_node) {
  const int g = int(dtype_size(l.grad_dtype));
  const OffloadPerParam d =
      offload_per_param(r.stage, l.offload, l.optimizer, g, r.dense_shard, r.dp_per_node, l.microbatches);
  const OffloadPerParam e =
      offload_per_param(r.stage, l.offload, l.optimizer, g, r.expert_shard, expert_per_node, l.microbatches);
  auto total = [&](double OffloadPerParam::*f) { return d.*f * r.dense_params + e.*f * r.expert_params; };
  OffloadRow o;
  o.host_bytes = total(&OffloadPerParam::host);
  o.host_bytes_per_param = o.host_bytes / r.params_per_gpu;
  o.slot_bytes = double(l.slots) * offload_slot_bytes_per_element(l.offload, g) * r.params_per_gpu /
                 double(l.chunks);
  o.device_bytes = r.bytes_per_gpu - total(&OffloadPerParam::freed) + o.slot_bytes;
  o.device_bytes_per_param = o.device_bytes / r.params_per_gpu;
  o.device_saved_bytes = r.bytes_per_gpu - o.device_bytes;
  o.d2h_bytes_per_step = total(&OffloadPerParam::d2h);
  o.h2d_bytes_per_step = total(&OffloadPerParam::h2d);
  o.pcie_bytes_per_step = o.d2h_bytes_per_step + o.h2d_bytes_per_step;
  o.pcie_bytes_per_param = o.pcie_bytes_per_step / r.params_per_gpu;
  return o;
}

PlanRow plan_row(const Layout& l, Stage stage, const Quantization& quant) {
  PlanRow r;
  r.stage = stage;
  r.quant = stage_model(stage).effective(quant);
  r.dp = l.dp, r.tp = l.tp, r.pp = l.pp, r.ep = l.ep, r.world = l.world();
  const double model_split = double(l.tp * l.pp);
  // Subtracting keeps dense + expert == Ψ exact where 1 - fraction would round.
  const double expert_total = l.params * l.expert_fraction;
  r.dense_params = (l.params - expert_total) / model_split;
  r.expert_params = expert_total / (model_split * double(l.ep));
  r.params_per_gpu = r.dense_params + r.expert_params;
  r.dense_shard = l.dp;
  r.expert_shard = l.dp / l.ep;

  const int g = int(dtype_size(l.grad_dtype));
  r.dp_per_node = dp_per_node(l);
  const int64_t se = expert_dp_per_node(l);
  const CategoryBytes d = bytes_per_param_by_category(stage, l.optimizer, g, r.dense_shard, r.dp_per_node);
  const CategoryBytes e = bytes_per_param_by_category(stage, l.optimizer, g, r.expert_shard, se);
  r.bytes.weights = d.weights * r.dense_params + e.weights * r.expert_params;
  r.bytes.grads = d.grads * r.dense_params + e.grads * r.expert_params;
  r.bytes.master = d.master * r.dense_params + e.master * r.expert_params;
  r.bytes.moments = d.moments * r.dense_params + e.moments * r.expert_params;
  r.bytes_per_gpu = r.bytes.total();
  r.gb_per_gpu = r.bytes_per_gpu / 1e9;
  r.bytes_per_param = r.bytes_per_gpu / r.params_per_gpu;

  // Dense and expert gradients are reduced in different groups (dp and dp/ep
  // ranks), so their ring factors differ even though the volume is the same.
  const StepTraffic td = step_traffic(stage, r.dense_shard, r.dense_params, g, r.dp_per_node, r.quant);
  const StepTraffic te = step_traffic(stage, r.expert_shard, r.expert_params, g, se, r.quant);
  r.elements_per_step = td.elements + te.elements;
  r.bytes_per_step = td.wire_bytes + te.wire_bytes;
  r.volume_psi = r.elements_per_step / r.params_per_gpu;
  r.volume_psi_inter = (td.inter_elements + te.inter_elements) / r.params_per_gpu;
  r.inter_node_bytes_per_step = td.inter_node_bytes / double(r.dp_per_node) + te.inter_node_bytes / double(se);
  if (l.offload != Offload::none) r.offload = offload_row(l, r, se);
  return r;
}

static const char* offload_what(Offload mode) {
  switch (mode) {
    case Offload::grads: return "the gradient the stage keeps lives on host, optimizer on the GPU";
    case Offload::optimizer:
      return "gradients, FP32 master and moments on host, optimizer on the CPU (ZeRO-Offload)";
    case Offload::weights:
      return "gradients, optimizer state and BF16 weights on host, weights streamed in for every "
             "forward and backward";
    case Offload::none: break;
  }
  return "nothing";
}

std::string format_plan_header(const Layout& l) {
  std::string out = "zb_plan: " + num(l.params) + " params, tp=" + std::to_string(l.tp) +
                    " pp=" + std::to_string(l.pp) + " ep=" + std::to_string(l.ep) +
                    ", expert fraction " + num(l.expert_fraction) + ", " +
                    optimizer_name(l.optimizer) + ", " + dtype_name(l.grad_dtype) +
                    " grads\n";
  out += "memory: resident model state per GPU (1 GB = 1e9 bytes); traffic: data-parallel "
         "collectives only (TP, PP and EP traffic not counted), ring ideal per GPU\n";
  if (l.offload != Offload::none)
    out += "offload=" + std::string(offload_name(l.offload)) + ": " + offload_what(l.offload) + "; " +
           std::to_string(l.slots) + " device slot(s) of 1/" + std::to_string(l.chunks) +
           " of the GPU's params; " + std::to_string(l.microbatches) +
           " micro-batch(es) per step; host and dev B/param per param of the GPU, dev "
           "including the slots; PCIe per step: device to host (D2H), host to device (H2D)\n";
  return out;
}

std::string format_plan_table(const std::vector<PlanRow>& rows) {
  if (rows.empty()) return "";
  const PlanRow& f = rows.front();
  std::string out = "\ndp=" + std::to_string(f.dp) + " (world " + std::to_string(f.world) +
                    "): " + fmt("%.6g", f.params_per_gpu) +
                    " params per GPU before sharding; dense " + fmt("%.6g", f.dense_params) +
                    " sharded over " + std::to_string(f.dense_shard) + ", expert " +
                    fmt("%.6g", f.expert_params) + " sharded over " +
                    std::to_string(f.expert_shard) + "; " + std::to_string(f.dp_per_node) +
                    " dp ranks per node\n";
  // The offload columns follow only when something is offloaded (the layout is the same for
  // every row of a table).
  const bool offload = f.offload.host_bytes > 0;
  // The stage column fits its longest name ("z3+qw:int8+qg:int4" where quantized).
  int width = 5;
  for (const PlanRow& r : rows) width = std::max(width, int(config_label(r.stage, r.quant).size()));
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %11s %10s %9s %9s %9s %9s %8s %13s %11s %10s %13s", width, "stage",
                "bytes/param", "GB/GPU", "weights", "grads", "master", "moments", "Psi/step",
                "elements/step", "GB/step/GPU", "inter Psi", "inter GB/GPU");
  out += line;
  if (offload) {
    std::snprintf(line, sizeof line, " %12s %11s %12s %11s %11s", "host B/param", "dev B/param",
                  "saved GB/GPU", "D2H GB/step", "H2D GB/step");
    out += line;
  }
  if (f.link_priced) out += " required Gbit/s";
  out += "\n";
  for (const PlanRow& r : rows) {
    std::snprintf(line, sizeof line,
                  "%-*s %11.4f %10.3f %9.3f %9.3f %9.3f %9.3f %8.3f %13.4e %11.3f %10.3f %13.3f", width,
                  config_label(r.stage, r.quant).c_str(), r.bytes_per_param, r.gb_per_gpu, r.bytes.weights / 1e9,
                  r.bytes.grads / 1e9, r.bytes.master / 1e9, r.bytes.moments / 1e9,
                  r.volume_psi, r.elements_per_step, r.bytes_per_step / 1e9, r.volume_psi_inter,
                  r.inter_node_bytes_per_step / 1e9);
    out += line;
    if (offload) {
      const OffloadRow& o = r.offload;
      std::snprintf(line, sizeof line, " %12.4f %11.4f %12.3f %11.3f %11.3f", o.host_bytes_per_param,
                    o.device_bytes_per_param, o.device_saved_bytes / 1e9, o.d2h_bytes_per_step / 1e9,
                    o.h2d_bytes_per_step / 1e9);
      out += line;
    }
    if (r.link_priced) {
      if (std::isfinite(r.required_link_gbps)) std::snprintf(line, sizeof line, " %15.3f", r.required_link_gbps);
      else std::snprintf(line, sizeof line, " %15s", "n/a");
      out += line;
    }
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json plan_json(const Layout& l, const std::vector<PlanRow>& rows) {
  nlohmann::ordered_json model = {{"params", l.params}, {"tp", l.tp}, {"pp", l.pp}, {"ep", l.ep},
                                  {"expert_fraction", l.expert_fraction},
                                  {"optimizer", optimizer_name(l.optimizer)}, {"grad_dtype", dtype_name(l.grad_dtype)}};
  if (l.offload != Offload::none) {
    model["offload"] = offload_name(l.offload);
    model["slots"] = l.slots;
    model["chunks"] = l.chunks;
    model["microbatches"] = l.microbatches;
  }
  nlohmann::ordered_json out = {{"model", model}, {"rows", nlohmann::ordered_json::array()}};
  for (const PlanRow& r : rows) {
    nlohmann::ordered_json row = {
        {"stage", stage_name(r.stage)}, {"quantize_weights", weight_quant_name(r.quant.weights)},
        {"quantize_grads", grad_quant_name(r.quant.grads)}, {"dp", r.dp}, {"tp", r.tp}, {"pp", r.pp}, {"ep", r.ep}, {"world", r.world},
        {"params_per_gpu", r.params_per_gpu}, {"dense_params", r.dense_params}, {"expert_params", r.expert_params},
        {"dense_shard", r.dense_shard}, {"expert_shard", r.expert_shard}, {"bytes_per_param", r.bytes_per_param},
        {"gb_per_gpu", r.gb_per_gpu}, {"bytes_per_gpu", r.bytes_per_gpu}, {"weights_bytes", r.bytes.weights},
        {"grads_bytes", r.bytes.grads}, {"master_bytes", r.bytes.master}, {"moments_bytes", r.bytes.moments},
        {"volume_psi", r.volume_psi}, {"elements_per_step", r.elements_per_step},
        {"bytes_per_step", r.bytes_per_step}, {"dp_per_node", r.dp_per_node},
        {"volume_psi_inter", r.volume_psi_inter}, {"inter_node_bytes_per_step", r.inter_node_bytes_per_step}};
    if (l.offload != Offload::none) {
      const OffloadRow& o = r.offload;
      row["host_bytes"] = o.host_bytes;
      row["host_bytes_per_param"] = o.host_bytes_per_param;
      row["slot_bytes"] = o.slot_bytes;
      row["device_bytes"] = o.device_bytes;
      row["device_bytes_per_param"] = o.device_bytes_per_param;
      row["device_saved_bytes"] = o.device_saved_bytes;
      row["d2h_bytes_per_step"] = o.d2h_bytes_per_step;
      row["h2d_bytes_per_step"] = o.h2d_bytes_per_step;
      row["pcie_bytes_per_step"] = o.pcie_bytes_per_step;
      row["pcie_bytes_per_param"] = o.pcie_bytes_per_param;
    }
    if (r.link_priced)  // null where no rate suffices or the row is one node
      row["required_link_gbps"] = std::isfinite(r.required_link_gbps) ? nlohmann::ordered_json(r.required_link_gbps)
                                                                      : nlohmann::ordered_json(nullptr);
    out["rows"].push_back(std::move(row));
  }
  return out;
}

}  // namespace zb
