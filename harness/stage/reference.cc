// The single-process reference for every step schedule: the same training, with the gradient
// sum over ranks computed here rather than by any collective.
#include "harness/stage/reference.h"

#include <algorithm>
#include <cstring>

#include "kernels/synthetic.h"
#include "kernels/thread_pool.h"

namespace zb {

Status reference_state(const StageConfig& config, int ranks, int64_t steps,
                       const std::vector<Segment>& segments, Compute& compute, CheckState* out) {
  uint64_t n = 0;
  for (const auto& s : segments) n += s.count;
  // Host copies drive the gradient sums; the optimizer runs on the same engine as the
  // benchmark (GPU kernels on a GPU), so the comparison is bit for bit.
  std::vector<float> master(n);
  std::vector<Bf16> w(n);
  std::vector<float> sum(n);
  std::vector<uint64_t> flat(n);
  for (uint64_t i = 0, at = 0; i < segments.size(); ++i) {
    init_weights_cpu(master.data() + at, w.data() + at, segments[i].count, segments[i].flat);
    for (uint64_t j = 0; j < segments[i].count; ++j) flat[at + j] = segments[i].flat + j;
    at += segments[i].count;
  }
  size_t gsz = dtype_size(config.grad_dtype);
  bool adam = config.optimizer.kind == Optimizer::adam;
  Buffer d_master, d_m, d_v, d_w, d_g;
  MemKind kind = compute.kind();
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind, n * 4, &d_master));
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind, n * 4, &d_m));
  if (adam) ZB_RETURN_IF_ERROR(Buffer::allocate(kind, n * 4, &d_v));
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind, n * 2, &d_w));
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind, n * gsz, &d_g));
  ZB_RETURN_IF_ERROR(copy_bytes(d_master.data(), kind, master.data(), MemKind::host, n * 4));
  ZB_RETURN_IF_ERROR(compute.zero(d_m.data(), n * 4));
  if (adam) ZB_RETURN_IF_ERROR(compute.zero(d_v.data(), n * 4));
  std::vector<char> g(n * gsz);

  for (int64_t t = 1; t <= steps; ++t) {
    // Every rank's gradient, summed in rank order. The values keep every partial sum
    // exact (see synthetic.h), so any reduction order gives these same bits. The host pays
    // ranks times the rank's elements a step, which at a GPU node's model sizes outweighs the
    // GPU steps themselves, so it runs on the rank's CPU threads; element by element from the
    // definition, not through the kernels it checks.
    parallel_chunks(size_t(n), compute.cpu_threads(), 64, size_t(1) << 15, [&](size_t begin, size_t end) {
      for (size_t j = begin; j < end; ++j) {
        float s = 0;
        for (int r = 0; r < ranks; ++r) s += synthetic_grad(w[j], r, ranks, t, flat[j]);
        sum[j] = s;
      }
      if (config.grad_dtype == DType::bf16) {
        Bf16* gb = reinterpret_cast<Bf16*>(g.data());
        for (size_t j = begin; j < end; ++j) gb[j] = float_to_bf16(sum[j]);
      } else {
        std::copy(sum.begin() + ptrdiff_t(begin), sum.begin() + ptrdiff_t(end),
                  reinterpret_cast<float*>(g.data()) + begin);
      }
    });
    ZB_RETURN_IF_ERROR(copy_bytes(d_g.data(), kind, g.data(), MemKind::host, n * gsz));
    ZB_RETURN_IF_ERROR(compute.update(config.optimizer, d_g.data(), config.grad_dtype,
                                      d_master.as<float>(), d_m.as<float>(),
                                      adam ? d_v.as<float>() : nullptr, d_w.as<Bf16>(), n, t,
                                      1.0f / float(ranks)));
    ZB_RETURN_IF_ERROR(compute.synchronize());
    ZB_RETURN_IF_ERROR(copy_bytes(w.data(), MemKind::host, d_w.data(), kind, n * 2));
  }
  ZB_RETURN_IF_ERROR(copy_bytes(master.data(), MemKind::host, d_master.data(), kind, n * 4));
  out->weights = std::move(w);
  out->master = std::move(master);
  return Status::ok();
}

uint64_t count_mismatches(const CheckState& got, const CheckState& want) {
  if (got.weights.size() != want.weights.size()) return std::max(got.weights.size(), want.weights.size());
  uint64_t bad = 0;
  for (size_t i = 0; i < got.weights.size(); ++i)
    bad += got.weights[i].bits != want.weights[i].bits ||
           std::memcmp(&got.master[i], &want.master[i], sizeof(float)) != 0;
  return bad;
}

Status copy_state_to_host(const Buffer& weights, const Buffer& master, const std::vector<Segment>& segments,
                          CheckState* out) {
  *out = CheckState();
  for (const Segment& s : segments) {
    const size_t at = out->weights.size();
    out->weights.resize(at + s.count);
    out->master.resize(at + s.count);
    ZB_RETURN_IF_ERROR(copy_bytes(out->weights.data() + at, MemKind::host, weights.as<Bf16>() + s.local,
                                  weights.kind(), s.count * 2));
    ZB_RETURN_IF_ERROR(copy_bytes(out->master.data() + at, MemKind::host, master.as<float>() + s.local_master,
                                  master.kind(), s.count * 4));
  }
  return Status::ok();
}

}  // namespace zb
