// The optimizer step of each ZeRO stage on real, staggered buffers: reduce, update, gather.
#include "harness/optimizer_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/pattern.h"

namespace zb {

size_t update_bytes_per_param(Optimizer kind, DType grad) {
  return kind == Optimizer::adam ? adam_bytes_per_param(grad) : momentum_bytes_per_param(grad);
}

const char* impl_name(MemKind kind) { return kind == MemKind::device ? "cuda" : "cpu"; }

Status StaggeredArrays::allocate(MemKind kind, const std::vector<size_t>& bytes) {
  constexpr size_t kPage = 4096, kStagger = kPage + 256;
  offsets_.clear();
  size_t end = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    offsets_.push_back((end + kPage - 1) / kPage * kPage + i * kStagger);
    end = offsets_.back() + bytes[i];
  }
  return Buffer::allocate(kind, end, &buffer_);
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

// One rank's optimizer step of a stage. It starts where backward ends, with this rank's full
// local gradient (z2 and z3 would reduce it bucket by bucket during backward instead; zb_zero
// measures that). The reduction reads the gradient and writes a separate buffer, so the input
// of every timed step is the same.
class OptimizerStep {
 public:
  OptimizerStep(Communicator& comm, Compute& compute, const StepSetup& s, FlatLayout layout)
      : comm_(comm), compute_(compute), s_(s), layout_(std::move(layout)),
        rank_(comm.rank()), ranks_(comm.size()), gsz_(dtype_size(s.grad_dtype)) {}

  uint64_t full() const { return layout_.padded; }
  uint64_t owned() const { return sharded() ? layout_.shard() : full(); }
  uint64_t held_weights() const { return s_.stage == Stage::z3 ? owned() : full(); }

  // One staggered allocation in the order of kArrays (see StaggeredArrays for why).
  Status allocate() {
    MemKind k = compute_.kind();
    ZB_RETURN_IF_ERROR(a_.allocate(k, {full() * gsz_, owned() * gsz_, owned() * 4, owned() * 4,
                                       adam() ? owned() * 4 : 0, held_weights() * 2}));
    // z3 holds only its shard; backward gathers the rest, so its gradient can be computed.
    if (s_.stage == Stage::z3) ZB_RETURN_IF_ERROR(Buffer::allocate(k, full() * 2, &gathered_));
    return Status::ok();
  }

  // Every rank starts from the same weights (initial_weight of the flat index) and zero moments.
  // It ends synchronised: on a GPU the collectives that read this state run on another stream.
  Status init_state() {
    ZB_RETURN_IF_ERROR(compute_.zero(a_.as<float>(kM), owned() * 4));
    if (adam()) ZB_RETURN_IF_ERROR(compute_.zero(a_.as<float>(kV), owned() * 4));
    float* master = a_.as<float>(kMaster);
    Bf16* weights = a_.as<Bf16>(kWeights);
    if (s_.stage == Stage::dp) {
      ZB_RETURN_IF_ERROR(compute_.init_weights(master, weights, full(), 0));
    } else if (s_.stage == Stage::z3) {
      for (const Unit& u : layout_.units)
        ZB_RETURN_IF_ERROR(compute_.init_weights(master + state_offset(u), weights + state_offset(u),
                                                 layout_.block(u), own_flat(u)));
    } else {
      Buffer all;  // z1/z2: the full weights, and the master of the own blocks taken from them
      ZB_RETURN_IF_ERROR(Buffer::allocate(compute_.kind(), full() * 4, &all));
      ZB_RETURN_IF_ERROR(compute_.init_weights(all.as<float>(), weights, full(), 0));
      for (const Unit& u : layout_.units)
        ZB_RETURN_IF_ERROR(compute_.copy(master + state_offset(u), all.as<float>() + own_flat(u),
                                         layout_.block(u) * 4));
      return compute_.synchronize();  // before `all` is freed
    }
    return compute_.synchronize();
  }

  // This rank's gradient of every element, computed from its current view of the weights.
  Status local_grad(int64_t step) {
    const Bf16* w = a_.as<Bf16>(kWeights);
    if (s_.stage == Stage::z3) {
      for (const Unit& u : layout_.units)
        ZB_RETURN_IF_ERROR(comm_.all_gather(w + state_offset(u), gathered_.as<Bf16>() + u.offset,
                                           layout_.block(u), DType::bf16));
      ZB_RETURN_IF_ERROR(comm_.synchronize());
      w = gathered_.as<Bf16>();
    }
    ZB_RETURN_IF_ERROR(
        compute_.synthetic_grad(w, a_.as<char>(kGrad), s_.grad_dtype, full(), 0, rank_, ranks_, step));
    return compute_.synchronize();
  }

  // Test only: a value no synthetic gradient takes (they are k/64 with |k| <= 12).
  Status corrupt_one() {
    char value[4];
    store_element(value, s_.grad_dtype, 0, 1.0);
    return copy_bytes(grad_at(kGrad, full() / 2), compute_.kind(), value, MemKind::host, gsz_);
  }

  Status reduce() {
    for (const Unit& u : layout_.units) {
      if (sharded())
        ZB_RETURN_IF_ERROR(comm_.reduce_scatter(grad_at(kGrad, u.offset),
                                               grad_at(kReduced, state_offset(u)), layout_.block(u),
                                               s_.grad_dtype));
      else
        ZB_RETURN_IF_ERROR(comm_.all_reduce(grad_at(kGrad, u.offset), grad_at(kReduced, u.offset),
                                           u.padded, s_.grad_dtype));
    }
    return comm_.synchronize();
  }

  // The reduced gradient is a sum over ranks; the kernel averages it with its scale.
  Status update(int64_t step) {
    for (const Unit& u : layout_.units) {
      uint64_t o = state_offset(u);
      ZB_RETURN_IF_ERROR(compute_.update(s_.optimizer, grad_at(kReduced, o), s_.grad_dtype,
                                         a_.as<float>(kMaster) + o, a_.as<float>(kM) + o,
                                         adam() ? a_.as<float>(kV) + o : nullptr,
                                         a_.as<Bf16>(kWeights) + weight_offset(u), state_count(u), step,
                                         1.0f / float(ranks_)));
    }
    return compute_.synchronize();
  }

  // z1 and z2 gather the BF16 weights in place; dp updated them all and z3 keeps its shard.
  bool gathers() const { return s_.stage == Stage::z1 || s_.stage == Stage::z2; }
  Status gather() {
    if (!gathers()) return Status::ok();
    Bf16* w = a_.as<Bf16>(kWeights);
    for (const Unit& u : layout_.units)
      ZB_RETURN_IF_ERROR(comm_.all_gather(w + layout_.own_offset(u, rank_), w + u.offset, layout_.block(u),
                                         DType::bf16));
    return comm_.synchronize();
  }

  // Elements (flat indices) whose weights this rank holds or whose master it owns, where either
  // differs from the reference in any bit.
  Status count_wrong(const CheckState& want, uint64_t* wrong) const {
    std::vector<Bf16> w(held_weights());
    std::vector<float> master(owned());
    ZB_RETURN_IF_ERROR(copy_bytes(w.data(), MemKind::host, a_.as<Bf16>(kWeights), a_.kind(), w.size() * 2));
    ZB_RETURN_IF_ERROR(
        copy_bytes(master.data(), MemKind::host, a_.as<float>(kMaster), a_.kind(), master.size() * 4));
    std::vector<uint8_t> bad(full(), 0);
    if (s_.stage != Stage::z3)
      for (uint64_t i = 0; i < full(); ++i) bad[i] = w[i].bits != want.weights[i].bits;
    for (const Unit& u : layout_.units)
      for (uint64_t j = 0, o = state_offset(u), f = own_flat(u); j < state_count(u); ++j) {
        bad[f + j] |= std::memcmp(&master[o + j], &want.master[f + j], sizeof(float)) != 0;
        if (s_.stage == Stage::z3) bad[f + j] |= w[o + j].bits != want.weights[f + j].bits;
      }
    *wrong = uint64_t(std::count(bad.begin(), bad.end(), uint8_t(1)));
    return Status::ok();
  }

 private:
  bool adam() const { return s_.optimizer.kind == Optimizer::adam; }
  // Element `elems` of the local or the reduced gradient.
  char* grad_at(int array, uint64_t elems) const { return a_.as<char>(array) + elems * gsz_; }
  bool sharded() const { return s_.stage != Stage::dp; }
  // The unit's elements this rank updates: where they sit in its state, and in the flat vector.
  uint64_t state_offset(const Unit& u) const { return sharded() ? layout_.shard_offset(u) : u.offset; }
  uint64_t state_count(const Unit& u) const { return sharded() ? layout_.block(u) : u.padded; }
  uint64_t own_flat(const Unit& u) const { return sharded() ? layout_.own_offset(u, rank_) : u.offset; }
  // Where the updated BF16 weights go: in place in the full weights, or in z3's shard.
  uint64_t weight_offset(const Unit& u) const {
    return s_.stage == Stage::z3 ? state_offset(u) : own_flat(u);
  }

  Communicator& comm_;
  Compute& compute_;
  StepSetup s_;
  FlatLayout layout_;
  int rank_, ranks_;
  size_t gsz_;
  enum { kGrad, kReduced, kMaster, kM, kV, kWeights };  // the arrays of a_
  StaggeredArrays a_;
  Buffer gathered_;
};

}  // namespace

Status run_step_benchmark(Run& run, Compute& compute, const StepSetup& setup,
                          StepReference* reference, StepResult* out) {
  Driver& d = run.driver();
  Communicator& comm = d.comm();
  const int n = comm.size();
  // One equal "layer" per bucket, one unit per layer: each bucket is one collective, padded to
  // a multiple of N when the stage shards it.
  ModelSpec model;
  ZB_RETURN_IF_ERROR(make_model("", double(setup.params), setup.buckets, &model));
  FlatLayout layout = make_layout(model, 0, n, setup.stage == Stage::dp ? 1 : n);
  out->padding = layout.padding();
  OptimizerStep st(comm, compute, setup, layout);
  ZB_RETURN_IF_ERROR(st.allocate());
  ZB_RETURN_IF_ERROR(st.init_state());
  ZB_RETURN_IF_ERROR(st.local_grad(1));

  // Each part is timed on this rank's wall clock; the maxima over ranks are taken after the
  // loop, so no reduction of ours runs inside a timed step.
  using clock = std::chrono::steady_clock;
  std::vector<double> parts;
  int64_t step = 0;
  auto once = [&]() -> Status {
    auto t0 = clock::now();
    ZB_RETURN_IF_ERROR(st.reduce());
    auto t1 = clock::now();
    ZB_RETURN_IF_ERROR(st.update(++step));
    auto t2 = clock::now();
    ZB_RETURN_IF_ERROR(st.gather());
    auto t3 = st.gathers() ? clock::now() : t2;  // dp and z3 gather nothing: exactly 0
    for (auto [a, b] : {std::pair{t0, t1}, std::pair{t1, t2}, std::pair{t2, t3}})
      parts.push_back(std::chrono::duration<double>(b - a).count());
    return Status::ok();
  };
  Timing t;
  ZB_RETURN_IF_ERROR(run.per_iteration(once, &t));
  run.report(t);
  // The loop ran the warm-up steps first; their parts are dropped.
  std::vector<double> mine(parts.begin() + std::min<ptrdiff_t>(ptrdiff_t(parts.size()), 3 * d.warmup()),
                           parts.end());
  std::vector<double> worst(mine.size());
  ZB_MPI_CHECK(
      MPI_Allreduce(mine.data(), worst.data(), int(mine.size()), MPI_DOUBLE, MPI_MAX, d.mpi_comm()));
  double* part_s[3] = {&out->reduce_s, &out->update_s, &out->gather_s};
  for (size_t p = 0; p < 3; ++p) {
    std::vector<double> column;
    for (size_t i = p; i < worst.size(); i += 3) column.push_back(worst[i]);
    *part_s[p] = median(column);
  }
  out->step_s = out->reduce_s + out->update_s + out->gather_s;

  if (setup.check) {
    // Replays a few steps from the initial state with gradients computed from each step's
    // weights, so a wrong gather or reduction changes later steps too.
    ZB_RETURN_IF_ERROR(st.init_state());
    for (int64_t s = 1; s <= kCheckSteps; ++s) {
      ZB_RETURN_IF_ERROR(st.local_grad(s));
      if (setup.corrupt && s == 1) ZB_RETURN_IF_ERROR(st.corrupt_one());
      ZB_RETURN_IF_ERROR(st.reduce());
      ZB_RETURN_IF_ERROR(st.update(s));
      ZB_RETURN_IF_ERROR(st.gather());
    }
    StepReference& ref = *reference;
    if (!ref.valid || ref.kind != setup.optimizer.kind || ref.grad != setup.grad_dtype ||
        ref.padded != st.full()) {
      ZeroConfig config;
      config.optimizer = setup.optimizer;
      config.grad_dtype = setup.grad_dtype;
      ref.valid = false;
      ZB_RETURN_IF_ERROR(
          reference_state(config, n, kCheckSteps, {Segment{0, 0, 0, st.full()}}, compute, &ref.state));
      ref.valid = true;
      ref.kind = setup.optimizer.kind;
      ref.grad = setup.grad_dtype;
      ref.padded = st.full();
    }
    uint64_t wrong = 0;
    ZB_RETURN_IF_ERROR(st.count_wrong(ref.state, &wrong));
    out->wrong = d.sum_over_ranks(double(wrong));
  }

  run.counter("ranks", n);
  run.counter("params", double(layout.params));
  run.counter("padding", double(layout.padding()));
  run.counter("state_params", double(st.owned()));
  run.counter("reduce_s", out->reduce_s);
  run.counter("update_s", out->update_s);
  run.counter("gather_s", out->gather_s);
  run.counter("step_s", out->step_s);
  run.counter("update_GBps", double(update_bytes_per_param(setup.optimizer.kind, setup.grad_dtype)) *
                                 double(st.owned()) / out->update_s / 1e9);
  run.counter("wrong", setup.check ? out->wrong : NAN);
  return Status::ok();
}

}  // namespace zb
