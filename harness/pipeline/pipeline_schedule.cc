// Pipeline schedules: Megatron's 1F1B orders and a replay of the whole pipeline for the idle slots.
#include "harness/pipeline/pipeline_schedule.h"

#include <algorithm>
#include <string>

namespace zb {

Status check_pipeline(const PipelineShape& s) {
  if (s.microbatches < 1) return Status::error("--microbatches must be at least 1");
  if (s.chunks < 1) return Status::error("--chunks must be at least 1");
  if (s.stages < 1) return Status::error("--pp must be at least 1");
  if (s.rank < 0 || s.rank >= s.stages)
    return Status::error("--pp-rank=" + std::to_string(s.rank) + " must be in [0, --pp=" +
                         std::to_string(s.stages) + ")");
  if (s.chunks > 1 && s.microbatches % s.stages != 0)
    return Status::error("--microbatches=" + std::to_string(s.microbatches) +
                         " must be a multiple of --pp=" + std::to_string(s.stages) +
                         " when --chunks > 1: the interleaved schedule sends micro-batches "
                         "through each chunk in groups of pp");
  return Status::ok();
}

std::vector<std::pair<int, int>> interleaved_table(int microbatches, int chunks, int group) {
  std::vector<std::pair<int, int>> table;
  for (int first = 0; first < microbatches; first += group) {
    int end = first + group >= microbatches ? microbatches : first + group;
    for (int c = 0; c < chunks; ++c)
      for (int mb = first; mb < end; ++mb) table.push_back({mb, c});
  }
  return table;
}

std::vector<PipeOp> pipeline_order(const PipelineShape& s) {
  const int P = s.stages, p = s.rank, M = s.microbatches, C = s.chunks;
  std::vector<PipeOp> order;
  if (C == 1) {
    int warmup = std::min(P - p - 1, M);
    for (int mb = 0; mb < warmup; ++mb) order.push_back({true, mb, 0});
    for (int k = 0; k < M - warmup; ++k) {
      order.push_back({true, warmup + k, 0});
      order.push_back({false, k, 0});
    }
    for (int mb = M - warmup; mb < M; ++mb) order.push_back({false, mb, 0});
    return order;
  }
  const auto table = interleaved_table(M, C, P);
  const int total = M * C;
  const int warmup = std::min(total, 2 * (P - p - 1) + (C - 1) * P);
  auto fwd = [&](int k) { return PipeOp{true, table[size_t(k)].first, table[size_t(k)].second}; };
  auto bwd = [&](int k) { return PipeOp{false, table[size_t(k)].first, C - 1 - table[size_t(k)].second}; };
  for (int k = 0; k < warmup; ++k) order.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(fwd(warmup + k));
    order.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd(k));
  return order;
}

Status pipeline_idle(const PipelineShape& shape, const std::vector<double>& fwd_s,
                     const std::vector<double>& bwd_s, std::vector<double>* idle_before) {
  const int P = shape.stages, M = shape.microbatches, V = shape.virtual_stages();
  if (int(fwd_s.size()) != V || int(bwd_s.size()) != V)
    return Status::error("pipeline_idle: need one forward and one backward time per virtual stage");
  std::vector<std::vector<PipeOp>> orders;
  for (int r = 0; r < P; ++r) {
    PipelineShape mine = shape;
    mine.rank = r;
    orders.push_back(pipeline_order(mine));
  }
  // End times per (micro-batch, virtual stage); negative until the op has run.
  std::vector<double> fwd_end(size_t(M) * size_t(V), -1), bwd_end(size_t(M) * size_t(V), -1);
  auto at = [&](int mb, int v) { return size_t(mb) * size_t(V) + size_t(v); };
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> free_at(size_t(P), 0);
  idle_before->assign(orders[size_t(shape.rank)].size(), 0);
  size_t left = 0;
  for (const auto& o : orders) left += o.size();
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < P; ++r) {
      const auto& order = orders[size_t(r)];
      for (size_t& i = next[size_t(r)]; i < order.size(); ++i) {
        const PipeOp& op = order[i];
        const int v = op.chunk * P + r;
        double ready = 0;
        if (op.forward) ready = v == 0 ? 0 : fwd_end[at(op.microbatch, v - 1)];
        else ready = v == V - 1 ? fwd_end[at(op.microbatch, v)] : bwd_end[at(op.microbatch, v + 1)];
        if (ready < 0) break;  // its input is not there yet
        const double start = std::max(free_at[size_t(r)], ready);
        if (r == shape.rank) (*idle_before)[i] = start - free_at[size_t(r)];
        free_at[size_t(r)] = start + (op.forward ? fwd_s[size_t(v)] : bwd_s[size_t(v)]);
        (op.forward ? fwd_end : bwd_end)[at(op.microbatch, v)] = free_at[size_t(r)];
        --left;
        progress = true;
      }
    }
    if (!progress) return Status::error("pipeline_idle: the schedule deadlocks");
  }
  return Status::ok();
}

std::vector<std::pair<int, int>> split_layers(int layers, int parts) {
  std::vector<std::pair<int, int>> out;
  int first = 0;
  for (int v = 0; v < parts; ++v) {
    int n = layers / parts + (v < layers % parts ? 1 : 0);
    out.push_back({first, first + n});
    first += n;
  }
  return out;
}

}  // namespace zb
