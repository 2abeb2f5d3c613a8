// The check of a quantized step: the unquantized reference, and the interval around it that the
// quantization kernels' error bounds allow, carried element by element through every step.
#include "harness/stage/quant_reference.h"

#include <algorithm>
#include <cmath>

#include "kernels/optimizer.h"
#include "kernels/quantize/quant_math.h"
#include "kernels/quantize/quantize.h"
#include "kernels/synthetic.h"
#include "kernels/thread_pool.h"

namespace zb {

namespace {

constexpr double kU = 0x1p-24;

// BF16 values in the order of their value: +0 and -0 are both 0, negatives count down from -1.
int32_t bf16_order(Bf16 b) {
  const int32_t mag = b.bits & 0x7fff;
  return (b.bits & 0x8000) ? -mag : mag;
}
double order_value(int32_t k) {
  return bf16_to_float(Bf16{uint16_t(k >= 0 ? k : 0x8000 | -k)});
}
int32_t order_at_least(double x) {
  int32_t k = bf16_order(float_to_bf16(float(x)));
  while (order_value(k) < x) ++k;
  while (order_value(k - 1) >= x) --k;
  return k;
}
int32_t order_at_most(double x) {
  int32_t k = bf16_order(float_to_bf16(float(x)));
  while (order_value(k) > x) --k;
  while (order_value(k + 1) <= x) ++k;
  return k;
}

// The low three bits (kernels/synthetic.h's dependence of a gradient on its weight) of the
// BF16 values in [lo, hi], as a mask. Sixteen consecutive values hold all eight, even where
// the range crosses zero (magnitudes count down, then up again).
unsigned low_bits(double lo, double hi) {
  const int32_t a = order_at_least(lo), b = order_at_most(hi);
  if (b - a >= 16) return 0xffu;
  unsigned mask = 0;
  for (int32_t k = a; k <= b; ++k) mask |= 1u << ((k < 0 ? -k : k) & 7);
  return mask;
}

// A float at or below (above) a double: the ends of an interval computed in double.
float down(double x) {
  const float f = float(x);
  return double(f) > x ? std::nextafter(f, -INFINITY) : f;
}
float up(double x) {
  const float f = float(x);
  return double(f) < x ? std::nextafter(f, INFINITY) : f;
}
// Two ulps outward: what one fused multiply-add per operation can move a GPU's result.
void widen(float* lo, float* hi) {
  for (int i = 0; i < 2; ++i) *lo = std::nextafter(*lo, -INFINITY), *hi = std::nextafter(*hi, INFINITY);
}

float bf16_value(float x) { return bf16_to_float(float_to_bf16(x)); }

// How far Adam's m / (sqrt(v) / sqrt(1 - beta2^t) + eps) can reach at step t, whatever the
// gradients: m and v come from the same gradients, so by Cauchy-Schwarz |m| <= sqrt(v) times
// sqrt(sum_j (1 - beta1)^2 (beta1^2 / beta2)^j / (1 - beta2)). The corners of (m, v) lose that
// link (a small v beside a large m), so the update's bounds are cut to this one; with a margin
// for FP32's roundings.
double adam_ratio_bound(const AdamParams& p, int64_t t) {
  const double b1 = p.beta1, b2 = p.beta2;
  double sum = 0;
  for (int64_t j = 0; j < t; ++j) sum += std::pow(b1 * b1 / b2, double(j));
  return std::sqrt(sum * (1 - b1) * (1 - b1) / (1 - b2)) * std::sqrt(1 - std::pow(b2, double(t))) * (1 + 1e-4);
}

// Per element state: the reference's and the interval's.
struct State {
  std::vector<float> master, m, v, lo, hi, m_lo, m_hi, v_lo, v_hi;
  std::vector<Bf16> w;
  std::vector<uint64_t> flat;
};

// Each weight's distance from what a quantized gather can give backward: block INT8 within its
// block's bound at the largest amax the block's interval allows; FP8 within the tensor bound at
// the unit's largest amax over every rank.
Status weight_errors(const Quantization& q, const std::vector<Segment>& segs, const std::vector<float>& wlo,
                     const std::vector<float>& whi,
                     const std::function<Status(std::vector<double>*)>& max_over_ranks, std::vector<double>* err) {
  std::fill(err->begin(), err->end(), 0.0);
  if (q.weights == WeightQuant::none) return Status::ok();
  auto mag = [&](size_t i) { return std::max(std::fabs(wlo[i]), std::fabs(whi[i])); };
  std::vector<double> amax(segs.size(), 0.0);
  for (size_t k = 0, at = 0; k < segs.size(); at += segs[k].count, ++k) {
    if (q.weights == WeightQuant::fp8) {
      for (size_t i = at; i < at + segs[k].count; ++i) amax[k] = std::max(amax[k], double(mag(i)));
      continue;
    }
    for (size_t b0 = at; b0 < at + segs[k].count; b0 += kWeightQuantBlock) {
      const size_t b1 = std::min<size_t>(at + segs[k].count, b0 + kWeightQuantBlock);
      float a = 0;
      for (size_t i = b0; i < b1; ++i) a = std::max(a, mag(i));
      const double e = block_error_bound(QuantFormat::int8, a / float(quant_qmax(QuantFormat::int8)), DType::bf16);
      for (size_t i = b0; i < b1; ++i) (*err)[i] = e;
    }
  }
  if (q.weights != WeightQuant::fp8) return Status::ok();
  ZB_RETURN_IF_ERROR(max_over_ranks(&amax));
  for (size_t k = 0, at = 0; k < segs.size(); at += segs[k].count, ++k) {
    const float scale = fp8_scale(float(amax[k]));
    for (size_t i = at; i < at + segs[k].count; ++i) (*err)[i] = fp8_error_bound(mag(i), scale, DType::bf16);
  }
  return Status::ok();
}

// qgZ's error on the gradient sum of one quantization block [b0, b1), from each rank's
// gradient bounds gl, gh (rank r's element i at r * stride + i): each rank's block quantized at
// the largest amax its bounds allow; with two hops, each node's FP32 sum and its requantization;
// then the final dequantized pieces added in the gradient dtype.
void grad_errors(GradQuant gq, const QuantShape& shape, DType gd, const std::vector<float>& gl,
                 const std::vector<float>& gh, size_t stride, size_t b0, size_t b1, double* err) {
  const QuantFormat f = quant_format(gq);
  const float qmax = float(quant_qmax(f));
  const int ranks = shape.ranks, s = shape.ranks_per_node, r = shape.nodes;
  const bool two_hops = s > 1 && r > 1;
  const double add = gd == DType::bf16 ? 0x1p-8 + 0x1p-23 : 0x1p-23;  // one add in the gradient dtype
  std::vector<double> e1(size_t(ranks), 0.0);
  auto mag = [&](int rank, size_t i) {
    return std::max(std::fabs(gl[size_t(rank) * stride + i]), std::fabs(gh[size_t(rank) * stride + i]));
  };
  for (int k = 0; k < ranks; ++k) {
    float a = 0;
    for (size_t i = b0; i < b1; ++i) a = std::max(a, mag(k, i));
    e1[size_t(k)] = block_error_bound(f, a / qmax, two_hops ? DType::f32 : gd);
  }
  double e1_sum = 0;
  for (double e : e1) e1_sum += e;
  if (!two_hops) {
    for (size_t i = b0; i < b1; ++i) {
      double total = 0;
      for (int k = 0; k < ranks; ++k) total += mag(k, i) + e1[size_t(k)];
      err[i - b0] = e1_sum + double(ranks - 1) * add * total + double(ranks) * 0x1p-133;
    }
    return;
  }
  // Node k sums its S ranks' dequantized pieces in FP32 and requantizes the sum in blocks.
  std::vector<double> node_err(b1 - b0, 0.0), total(b1 - b0, 0.0);
  for (int node = 0; node < r; ++node) {
    double a2 = 0;
    std::vector<double> sum(b1 - b0, 0.0);
    for (size_t i = b0; i < b1; ++i) {
      for (int j = 0; j < s; ++j) sum[i - b0] += mag(node * s + j, i) + e1[size_t(node * s + j)];
      sum[i - b0] *= 1 + double(s) * kU;  // the FP32 adds
      a2 = std::max(a2, sum[i - b0]);
    }
    const double e2 = block_error_bound(f, up(a2) / qmax, gd);
    for (size_t i = b0; i < b1; ++i) {
      node_err[i - b0] += double(s) * kU * sum[i - b0] + e2;
      total[i - b0] += sum[i - b0] + e2;
    }
  }
  for (size_t i = b0; i < b1; ++i)
    err[i - b0] = e1_sum + node_err[i - b0] + double(r - 1) * add * total[i - b0] + double(r) * 0x1p-133;
}

}  // namespace

Status bounded_reference(const StageConfig& config, const QuantShape& shape, int64_t steps,
                         const std::vector<Segment>& segments,
                         const std::function<Status(std::vector<double>*)>& max_over_ranks, int threads,
                         BoundedState* out) {
  const Quantization q = stage_model(config.stage).effective(config.quant);
  const int ranks = shape.ranks;
  size_t n = 0, widest = 0;
  for (const Segment& s : segments) n += s.count, widest = std::max<size_t>(widest, s.count);
  State st;
  st.master.resize(n), st.w.resize(n), st.flat.resize(n);
  for (size_t k = 0, at = 0; k < segments.size(); at += segments[k].count, ++k) {
    init_weights_cpu(st.master.data() + at, st.w.data() + at, segments[k].count, segments[k].flat);
    for (size_t j = 0; j < segments[k].count; ++j) st.flat[at + j] = segments[k].flat + j;
  }
  st.m.assign(n, 0.0f), st.v.assign(n, 0.0f);
  st.lo = st.hi = st.master;
  st.m_lo = st.m_hi = st.v_lo = st.v_hi = st.m;
  const bool adam = config.optimizer.kind == Optimizer::adam;
  const DType gd = config.grad_dtype;
  std::vector<float> wlo(n), whi(n), gl(size_t(ranks) * widest), gh(size_t(ranks) * widest);
  std::vector<double> werr(n), glo(widest), ghi(widest);

  for (int64_t t = 1; t <= steps; ++t) {
    AdamParams ap = config.optimizer.adam;
    ap.step = t, ap.grad_scale = 1.0f / float(ranks);
    MomentumParams mp = config.optimizer.momentum;
    mp.grad_scale = 1.0f / float(ranks);
    const AdamConstants ac = adam_constants(ap);
    const MomentumConstants mc = momentum_constants(mp);
    const double ratio_bound = adam_ratio_bound(ap, t);
    parallel_chunks(n, threads, 64, size_t(1) << 16, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) wlo[i] = bf16_value(st.lo[i]), whi[i] = bf16_value(st.hi[i]);
    });
    ZB_RETURN_IF_ERROR(weight_errors(q, segments, wlo, whi, max_over_ranks, &werr));
    for (size_t k = 0, at = 0; k < segments.size(); at += segments[k].count, ++k) {
      const size_t count = segments[k].count;
      // Elements are independent but for qgZ's blocks, so the segment runs on the rank's CPU
      // threads in whole blocks: ranks x 9 gradients an element and step, on a GPU node's
      // model sizes, would otherwise take longer than the benchmark it checks.
      parallel_chunks(count, threads, kGradQuantBlock, kGradQuantBlock, [&](size_t begin, size_t end) {
        // Every rank's gradient: the reference's at its weight, and the bounds over every weight
        // the quantized run's backward can see.
        for (size_t i = begin; i < end; ++i) {
          const size_t e = at + i;
          const unsigned mask = low_bits(double(wlo[e]) - werr[e], double(whi[e]) + werr[e]);
          float ref = 0;
          glo[i] = ghi[i] = 0;
          for (int r = 0; r < ranks; ++r) {
            const uint64_t hash = grad_group_hash(r, t, st.flat[e]);
            ref += synthetic_grad_hashed(st.w[e], r, ranks, st.flat[e], hash);
            float lo = INFINITY, hi = -INFINITY;
            for (unsigned b = 0; b < 8; ++b)
              if (mask & (1u << b)) {
                const float g = synthetic_grad_hashed(Bf16{uint16_t(b)}, r, ranks, st.flat[e], hash);
                lo = std::min(lo, g), hi = std::max(hi, g);
              }
            gl[size_t(r) * widest + i] = lo, gh[size_t(r) * widest + i] = hi;
            glo[i] += lo, ghi[i] += hi;
          }
          // The reference: the exact sum (synthetic.h keeps it exact), in the gradient dtype.
          const float grad = gd == DType::bf16 ? bf16_value(ref) : ref;
          if (adam) {
            adam_element(grad, st.master[e], st.m[e], st.v[e], st.w[e], ac);
          } else {
            momentum_element(grad, st.master[e], st.m[e], st.w[e], mc);
          }
        }
        std::vector<double> gerr(q.grads != GradQuant::none ? kGradQuantBlock : 0);
        if (q.grads != GradQuant::none)
          for (size_t b0 = begin; b0 < end; b0 += kGradQuantBlock) {
            const size_t b1 = std::min(end, b0 + kGradQuantBlock);
            grad_errors(q.grads, shape, gd, gl, gh, widest, b0, b1, gerr.data());
            for (size_t i = b0; i < b1; ++i) {
              const double e = gerr[i - b0] * (1 + 1e-6);
              glo[i] -= e, ghi[i] += e;
            }
          }
        // The optimizer over the box of its inputs: monotone in each, so the corners bound it.
        for (size_t i = begin; i < end; ++i) {
          const size_t e = at + i;
          const float g0 = down(glo[i]), g1 = up(ghi[i]);
          float& lo = st.lo[e];
          float& hi = st.hi[e];
          if (!adam) {
            const float m0 = mc.beta * st.m_lo[e] + g0 * mc.grad_scale;
            const float m1 = mc.beta * st.m_hi[e] + g1 * mc.grad_scale;
            lo = mc.decay * lo - mc.lr * m1;
            hi = mc.decay * hi - mc.lr * m0;
            st.m_lo[e] = m0, st.m_hi[e] = m1;
          } else {
            const float s0 = g0 * ac.grad_scale, s1 = g1 * ac.grad_scale;
            const float a0 = s0 <= 0 && s1 >= 0 ? 0.0f : std::min(std::fabs(s0), std::fabs(s1));
            const float a1 = std::max(std::fabs(s0), std::fabs(s1));
            const float m0 = ac.beta1 * st.m_lo[e] + ac.one_minus_beta1 * s0;
            const float m1 = ac.beta1 * st.m_hi[e] + ac.one_minus_beta1 * s1;
            const float v0 = ac.beta2 * st.v_lo[e] + (ac.one_minus_beta2 * a0) * a0;
            const float v1 = ac.beta2 * st.v_hi[e] + (ac.one_minus_beta2 * a1) * a1;
            // adam_master is decay * master - step_size * (m / denom): the ratio's corners, cut to
            // what Adam can reach, then the master's ends.
            float r0 = INFINITY, r1 = -INFINITY;
            for (float mm : {m0, m1})
              for (float vv : {v0, v1}) {
                const float ratio = mm / (std::sqrt(vv) * ac.inv_sqrt_bc2 + ac.eps);
                r0 = std::min(r0, ratio), r1 = std::max(r1, ratio);
              }
            r0 = std::max(r0, down(-ratio_bound)), r1 = std::min(r1, up(ratio_bound));
            lo = ac.decay * lo - ac.step_size * r1;
            hi = ac.decay * hi - ac.step_size * r0;
            st.m_lo[e] = m0, st.m_hi[e] = m1, st.v_lo[e] = v0, st.v_hi[e] = v1;
            widen(&st.v_lo[e], &st.v_hi[e]);
            st.v_lo[e] = std::max(st.v_lo[e], 0.0f);
          }
          widen(&st.m_lo[e], &st.m_hi[e]);
          widen(&lo, &hi);
        }
      });
    }
  }
  out->ref.weights = std::move(st.w);
  out->ref.master = std::move(st.master);
  out->master_lo = std::move(st.lo);
  out->master_hi = std::move(st.hi);
  return Status::ok();
}

BoundCheck check_bounded(const CheckState& got, const BoundedState& want) {
  BoundCheck c;
  const size_t n = want.ref.weights.size();
  c.count = n;
  if (got.weights.size() != n || got.master.size() != n) {
    c.outside = std::max<uint64_t>(n, got.weights.size());
    return c;
  }
  for (size_t i = 0; i < n; ++i) {
    const float w = bf16_to_float(got.weights[i]), m = got.master[i], ref = want.ref.master[i];
    const float lo = want.master_lo[i], hi = want.master_hi[i];
    // NaN compares false, so it lands outside.
    const bool inside = w >= bf16_value(lo) && w <= bf16_value(hi) && m >= lo && m <= hi;
    c.outside += inside ? 0 : 1;
    const double d = std::fabs(double(m) - double(ref));
    c.error_max = std::max(c.error_max, std::isnan(d) ? INFINITY : d);
    c.error_sq += d * d;
    c.ref_sq += double(ref) * double(ref);
    c.bound_max = std::max({c.bound_max, double(ref) - double(lo), double(hi) - double(ref)});
  }
  return c;
}

}  // namespace zb
