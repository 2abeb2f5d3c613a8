// ZeRO++ in the ZeRO step: weights gathered quantized (qwZ's INT8 blocks, or FP8 with one scale
// per layer as torchtitan casts them), and gradients reduced as qgZ does, quantized through an
// all-to-all within the node and then one across nodes in place of the reduce-scatter.
#include <algorithm>
#include <string>

#include "harness/zero/zero_step.h"

namespace zb {

namespace {

uint64_t largest_block(const FlatLayout& layout) {
  uint64_t b = 0;
  for (const Unit& u : layout.units) b = std::max(b, layout.block(u));
  return b;
}

}  // namespace

// Buffers beside the state, all transient: per gathered buffer this rank's block as a piece and
// every rank's; FP8's amaxes; qgZ's two sets of hop buffers and one piece dequantized for the sum.
Status ZeroStep::create_quantized() {
  quant_ = model_.effective(config_.quant);
  if (!quant_.any()) return Status::ok();
  qops_ = std::make_unique<QuantOps>(compute_, config_.cpu_threads);
  MemoryTracker& t = state_->tracker();
  const uint64_t block = largest_block(layout_), ranks = uint64_t(place_.ranks);
  const size_t units = layout_.units.size();
  if (quant_.weights != WeightQuant::none) {
    const size_t piece = quant_record_bytes(quant_format(quant_.weights), block, kWeightQuantBlock);
    qgather_send_.resize(gathered_.size());
    qgather_recv_.resize(gathered_.size());
    for (size_t b = 0; b < gathered_.size(); ++b) {
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece, &qgather_send_[b]));
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece * ranks, &qgather_recv_[b]));
    }
    if (quant_.weights == WeightQuant::fp8) {
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, units * 4, &amax_own_));
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, units * 4 * ranks, &amax_all_));
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, units * 4, &amax_));
      amax_host_.resize(units * ranks);
    }
  }
  if (quant_.grads == GradQuant::none) return Status::ok();
  // The hops, as ZeRO++ orders them: within the node first, so only the node's sum of each
  // piece crosses to the node that owns it. Block o of a unit belongs to rank o, on node o / S
  // at place o % S: nodes must hold consecutive ranks.
  const int s = comm_.group_size(Group::node), r = comm_.group_size(Group::cross);
  hop_node_ = place_.ranks > 1 && (s > 1 || r == 1) ? s : 0;
  hop_cross_ = r > 1 ? r : 0;
  if (comm_.group_size(Group::node) * r != comm_.size() ||
      place_.rank != comm_.group_rank(Group::cross) * s + comm_.group_rank(Group::node))
    return Status::error(std::string(model_.name) + " with quantized gradients needs nodes of consecutive ranks, "
                         "the same number on every node");
  const size_t piece = quant_record_bytes(quant_format(quant_.grads), block, kGradQuantBlock);
  for (int k = 0; k < 2; ++k) {
    if (hop_node_) {
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece * ranks, &qsend1_[k]));
      ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece * ranks, &qrecv1_[k]));
    }
    // Without a node hop the pieces go straight to the cross-node hop (one node: one piece).
    ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece * uint64_t(r), &qsend2_[k]));
    if (hop_cross_) ZB_RETURN_IF_ERROR(t.allocate(MemCategory::transient, piece * uint64_t(r), &qrecv2_[k]));
  }
  return t.allocate(MemCategory::transient, block * dtype_size(config_.grad_dtype), &qsum_);
}

// ---- Weights.

bool ZeroStep::gathers_quantized(size_t pos) const {
  // hpz's backward gathers its node copy, kept in BF16 from forward's dequantized weights.
  return quant_.weights != WeightQuant::none && !(pos >= layout_.units.size() && model_.node_weight_copy);
}

// This rank's block of the unit quantized into one piece on the compute engine, then every
// rank's piece gathered, as bytes (BF16 elements, half as many).
Status ZeroStep::quantized_gather(int unit, size_t buffer, Group group) {
  const Unit& u = layout_.units[size_t(unit)];
  const uint64_t n = layout_.block(u);
  const QuantFormat f = quant_format(quant_.weights);
  const size_t piece = quant_record_bytes(f, n, kWeightQuantBlock);
  const Bf16* own = state_->weights().as<Bf16>() + state_->weight_offset(u);
  if (schedule_) schedule_->kernel("quantize", unit, quant_format_name(f), double(n));
  if (kernels_run()) {
    TraceScope span(&trace_, "quantize U" + std::to_string(unit), "\"unit\": " + std::to_string(unit));
    if (f == QuantFormat::fp8)
      ZB_RETURN_IF_ERROR(qops_->fp8_quantize(own, DType::bf16, n, amax_.as<float>() + unit, gather_send(buffer)));
    else
      ZB_RETURN_IF_ERROR(qops_->quantize(own, DType::bf16, n, f, kWeightQuantBlock, gather_send(buffer)));
  }
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));  // it sends what the kernel wrote
  if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = unit;
  return comm_.all_gather(gather_send(buffer), gather_recv(buffer), piece / 2, DType::bf16, group);
}

// Every rank's piece back into its block of the gathered unit, once the gather has arrived.
Status ZeroStep::dequantize_gathered(int unit, size_t buffer) {
  if (mode_ == StepMode::compute_only) return Status::ok();
  const Unit& u = layout_.units[size_t(unit)];
  const uint64_t n = layout_.block(u);
  const QuantFormat f = quant_format(quant_.weights);
  if (schedule_) schedule_->kernel("dequantize", unit, quant_format_name(f), double(n) * place_.ranks);
  if (!kernels_run()) return Status::ok();
  TraceScope span(&trace_, "dequantize U" + std::to_string(unit), "\"unit\": " + std::to_string(unit));
  const size_t piece = quant_record_bytes(f, n, kWeightQuantBlock);
  for (int r = 0; r < place_.ranks; ++r) {
    const uint8_t* from = gather_recv(buffer) + size_t(r) * piece;
    Bf16* to = gathered_[buffer].as<Bf16>() + uint64_t(r) * n;
    if (f == QuantFormat::fp8)
      ZB_RETURN_IF_ERROR(qops_->fp8_dequantize(from, n, amax_.as<float>() + unit, to, DType::bf16));
    else
      ZB_RETURN_IF_ERROR(qops_->dequantize(from, n, f, kWeightQuantBlock, to, DType::bf16));
  }
  return Status::ok();
}

// FP8 scales each layer by its amax, the largest of its shards' (torchtitan computes them all
// once after the optimizer step, in one collective): each rank's amax of every unit, gathered
// (an FP32 travels as two BF16 elements), then the maximum per unit, which the host needs.
Status ZeroStep::exchange_amax() {
  if (mode_ == StepMode::compute_only) return Status::ok();
  const size_t units = layout_.units.size();
  if (schedule_) {
    double elements = 0;  // this rank's block of every unit
    for (const Unit& u : layout_.units) elements += double(layout_.block(u));
    schedule_->kernel("amax", -1, quant_format_name(QuantFormat::fp8), elements);
  }
  if (kernels_run()) {
    TraceScope span(&trace_, "amax", "\"units\": " + std::to_string(units));
    for (size_t i = 0; i < units; ++i) {
      const Unit& u = layout_.units[i];
      const Bf16* own = state_->weights().as<Bf16>() + state_->weight_offset(u);
      ZB_RETURN_IF_ERROR(qops_->fp8_amax(own, DType::bf16, layout_.block(u), amax_own_.as<float>() + i));
    }
  }
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1);
  ZB_RETURN_IF_ERROR(comm_.all_gather(amax_own_.data(), amax_all_.data(), units * 2, DType::bf16, Group::world));
  Event gathered;
  ZB_RETURN_IF_ERROR(comm_.record(&gathered));
  ZB_RETURN_IF_ERROR(compute_after(gathered));
  ZB_RETURN_IF_ERROR(comm_.wait(gathered));
  if (!kernels_run()) return Status::ok();
  const bool host = amax_all_.kind() != MemKind::device;
  if (!host)
    ZB_RETURN_IF_ERROR(copy_bytes(amax_host_.data(), MemKind::host, amax_all_.data(), amax_all_.kind(),
                                  amax_host_.size() * 4));
  const float* all = host ? amax_all_.as<float>() : amax_host_.data();
  std::vector<float> amax(units, 0.0f);
  for (int r = 0; r < place_.ranks; ++r)
    for (size_t i = 0; i < units; ++i) amax[i] = std::max(amax[i], all[size_t(r) * units + i]);
  if (host) {
    std::copy(amax.begin(), amax.end(), amax_.as<float>());
    return Status::ok();
  }
  ZB_RETURN_IF_ERROR(compute_.copy(amax_.data(), amax.data(), units * 4));
  return compute_.synchronize();  // the copy reads `amax`, which goes out of scope
}

// ---- Gradients: qgZ.

// Quantizes the unit's gradient into pieces, one per block owner, in the order the first hop
// sends them, and issues that hop. With a node hop, node peer j gets, for every node k, the
// piece of block k S + j; without one (one rank per node), node k gets the piece of block
// k S + j straight away. Whatever is in flight advances one phase first, oldest first, so the
// set of buffers this one takes is free.
Status ZeroStep::start_reduction(const Unit& u, int unit, const void* grad) {
  for (size_t i = 0; i < pending_.size();) {
    bool finished = false;
    ZB_RETURN_IF_ERROR(advance(pending_[i], &finished));
    if (finished) pending_.erase(pending_.begin() + ptrdiff_t(i));
    else ++i;
  }
  const int set = next_set_;
  next_set_ ^= 1;
  const uint64_t n = layout_.block(u);
  const QuantFormat f = quant_format(quant_.grads);
  const size_t piece = quant_record_bytes(f, n, kGradQuantBlock), gsz = dtype_size(config_.grad_dtype);
  const int s = comm_.group_size(Group::node), r = comm_.group_size(Group::cross), j = comm_.group_rank(Group::node);
  const char* g = static_cast<const char*>(grad);
  uint8_t* out = hop_node_ ? qsend1_[set].as<uint8_t>() : qsend2_[set].as<uint8_t>();
  if (schedule_) schedule_->kernel("quantize", unit, quant_format_name(f), double(n) * (hop_node_ ? s : 1) * r);
  if (kernels_run()) {
    TraceScope span(&trace_, "quantize U" + std::to_string(unit), "\"unit\": " + std::to_string(unit));
    for (int peer = 0; peer < (hop_node_ ? s : 1); ++peer)
      for (int k = 0; k < r; ++k) {
        const uint64_t owner = uint64_t(k) * uint64_t(s) + uint64_t(hop_node_ ? peer : j);
        ZB_RETURN_IF_ERROR(qops_->quantize(g + owner * n * gsz, config_.grad_dtype, n, f, kGradQuantBlock,
                                           out + (size_t(peer) * size_t(r) + size_t(k)) * piece));
      }
  }
  PendingReduce p{unit, set, hop_node_ ? 1 : 2, Event()};
  if (!hop_node_ && !hop_cross_) {  // one rank: its own piece is the sum
    ZB_RETURN_IF_ERROR(combine(u, out, 1));
    return Status::ok();
  }
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = unit;
  if (hop_node_)
    ZB_RETURN_IF_ERROR(comm_.all_to_all(out, qrecv1_[set].data(), size_t(r) * piece / 2, DType::bf16, Group::node));
  else
    ZB_RETURN_IF_ERROR(comm_.all_to_all(out, qrecv2_[set].data(), piece / 2, DType::bf16, Group::cross));
  ZB_RETURN_IF_ERROR(comm_.record(&p.done));
  pending_.push_back(p);
  if (config_.overlap) return Status::ok();
  // Serialised: compute waits for every hop at once, and those waits are exposed.
  bool finished = false;
  while (!finished) ZB_RETURN_IF_ERROR(advance(pending_.back(), &finished));
  pending_.pop_back();
  return Status::ok();
}

// Phase 1 done (the node's all-to-all arrived): each node's piece summed over the node's S
// pieces and requantized (qgZ's dequantize-reduce-requantize), then sent to the node that owns
// it; on one node, the sum is this rank's block. Phase 2 done: the R nodes' sums added.
Status ZeroStep::advance(PendingReduce& p, bool* finished) {
  const Unit& u = layout_.units[size_t(p.unit)];
  const uint64_t n = layout_.block(u);
  const QuantFormat f = quant_format(quant_.grads);
  const size_t piece = quant_record_bytes(f, n, kGradQuantBlock);
  const int s = comm_.group_size(Group::node), r = comm_.group_size(Group::cross);
  ZB_RETURN_IF_ERROR(compute_after(p.done));
  *finished = p.phase == 2 || !hop_cross_;
  if (p.phase == 2) return combine(u, qrecv2_[p.set].as<uint8_t>(), r);
  const uint8_t* in = qrecv1_[p.set].as<uint8_t>();
  if (!hop_cross_) return combine(u, in, s);
  uint8_t* out = qsend2_[p.set].as<uint8_t>();
  if (schedule_) schedule_->kernel("reduce", p.unit, quant_format_name(f), double(n) * r * s);
  if (kernels_run()) {
    TraceScope span(&trace_, "reduce U" + std::to_string(p.unit), "\"unit\": " + std::to_string(p.unit));
    // From node peer j, piece k sits at (j R + k) pieces: S inputs R pieces apart.
    for (int k = 0; k < r; ++k)
      ZB_RETURN_IF_ERROR(qops_->reduce(in + size_t(k) * piece, size_t(r) * piece, s, n, f, kGradQuantBlock,
                                       out + size_t(k) * piece));
  }
  ZB_RETURN_IF_ERROR(comm_.comm_waits_for_compute(compute_.stream()));
  if (trace_.enabled()) log_unit_.resize(comm_.traffic().size() + 1, -1), log_unit_.back() = p.unit;
  ZB_RETURN_IF_ERROR(comm_.all_to_all(out, qrecv2_[p.set].data(), piece / 2, DType::bf16, Group::cross));
  ZB_RETURN_IF_ERROR(comm_.record(&p.done));
  p.phase = 2;
  return Status::ok();
}

// `count` pieces of this rank's block, `piece` bytes apart, dequantized into the gradient shard
// in its own dtype and added in order, as DeepSpeed sums the dequantized chunks.
Status ZeroStep::combine(const Unit& u, const uint8_t* pieces, int count) {
  const int unit = int(&u - layout_.units.data());
  const uint64_t n = layout_.block(u);
  const QuantFormat f = quant_format(quant_.grads);
  if (schedule_) schedule_->kernel("dequantize", unit, quant_format_name(f), double(n) * count);
  if (!kernels_run()) return Status::ok();
  TraceScope span(&trace_, "dequantize U" + std::to_string(unit), "\"unit\": " + std::to_string(unit));
  const size_t piece = quant_record_bytes(f, n, kGradQuantBlock);
  const DType gd = config_.grad_dtype;
  char* own = state_->grad_at(state_->grads().data(), state_->grad_offset(u));
  ZB_RETURN_IF_ERROR(qops_->dequantize(pieces, n, f, kGradQuantBlock, own, gd));
  for (int i = 1; i < count; ++i) {
    ZB_RETURN_IF_ERROR(qops_->dequantize(pieces + size_t(i) * piece, n, f, kGradQuantBlock, qsum_.data(), gd));
    ZB_RETURN_IF_ERROR(compute_.accumulate(own, qsum_.data(), gd, n));
  }
  return Status::ok();
}

Status ZeroStep::drain_reductions() {
  while (!pending_.empty()) {
    bool finished = false;
    ZB_RETURN_IF_ERROR(advance(pending_.front(), &finished));
    if (finished) pending_.pop_front();
  }
  return Status::ok();
}

}  // namespace zb
