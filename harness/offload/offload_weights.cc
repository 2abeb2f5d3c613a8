// Weights in through S device slots: a model kept in pinned host memory is copied to the device
// layer by layer on the copy engine, each layer's load issued as soon as the layer S before it
// has finished computing in the slot they share.
#include <algorithm>
#include <cstring>
#include <string>

#include "harness/core/clock.h"
#include "harness/offload/offload.h"
#include "kernels/synthetic.h"

namespace zb {

Status OffloadWeights::create(Compute& compute, const ModelSpec& model, int slots, bool corrupt,
                              std::unique_ptr<OffloadWeights>* out) {
  if (slots < 1) return Status::error("offload needs at least one slot");
  auto w = std::unique_ptr<OffloadWeights>(new OffloadWeights(compute, slots, corrupt));
  uint64_t largest = 0;
  w->offsets_.push_back(0);
  for (const LayerSpec& l : model.layers) {
    w->offsets_.push_back(w->offsets_.back() + l.params);
    largest = std::max(largest, l.params);
  }
  ZB_RETURN_IF_ERROR(CopyEngine::create(compute.kind(), &w->engine_));
  MemoryTracker host(offload_host_kind(compute.kind())), device(compute.kind());
  int64_t before = 0, after = 0;
  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &before));
  ZB_RETURN_IF_ERROR(host.allocate(MemCategory::weights, w->params() * 2, &w->host_weights_));
  ZB_RETURN_IF_ERROR(used_memory_bytes(MemKind::host, &after));
  w->measured_host_ = after - before;
  w->slot_bytes_ = largest * 2;
  w->slot_.resize(size_t(slots));
  ZB_RETURN_IF_ERROR(used_memory_bytes(compute.kind(), &before));
  for (Buffer& b : w->slot_) ZB_RETURN_IF_ERROR(device.allocate(MemCategory::weights, w->slot_bytes_, &b));
  ZB_RETURN_IF_ERROR(used_memory_bytes(compute.kind(), &after));
  w->measured_device_ = after - before;
  // zb_zero's initial weights, layer by layer through a small FP32 scratch.
  std::vector<float> master(largest);
  for (size_t l = 0; l + 1 < w->offsets_.size(); ++l)
    init_weights_cpu(master.data(), w->host_weights_.as<Bf16>() + w->offsets_[l], w->offsets_[l + 1] - w->offsets_[l],
                     w->offsets_[l]);
  *out = std::move(w);
  return Status::ok();
}

CopyEngine::Ticket OffloadWeights::load(int layer) {
  const uint64_t first = offsets_[size_t(layer)], count = offsets_[size_t(layer) + 1] - first;
  const int s = layer % slots_;
  return engine_->copy(slot_[size_t(s)].data(), host_weights_.as<Bf16>() + first, count * 2, CopyDir::h2d,
                       "h2d l" + std::to_string(layer),
                       "\"layer\": " + std::to_string(layer) + ", \"slot\": " + std::to_string(s));
}

Status OffloadWeights::step(bool check) {
  const int L = int(offsets_.size()) - 1;
  times_ = OffloadTimes();
  mismatches_ = 0;
  engine_->take_stats();
  std::vector<CopyEngine::Ticket> loaded(size_t(L), 0);
  for (int l = 0; l < std::min(L, slots_); ++l) loaded[size_t(l)] = load(l);
  for (int l = 0; l < L; ++l) {
    // The engine is drained before the wait, so the wait is time it stands idle.
    ZB_RETURN_IF_ERROR(compute_.synchronize());
    const double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(engine_->wait(loaded[size_t(l)]));
    const double t1 = now_seconds();
    // The first layer loads as the step starts, with nothing to hide behind: the head, apart,
    // as the gradients' tail is.
    (l == 0 ? times_.head_s : times_.exposed_s) += t1 - t0;
    trace_.add({"wait slot " + std::to_string(l % slots_), Track::wait, t0, t1, "\"layer\": " + std::to_string(l)});
    {
      TraceScope span(&trace_, "forward l" + std::to_string(l),
                      "\"layer\": " + std::to_string(l) + ", \"slot\": " + std::to_string(l % slots_));
      if (layer_compute_) ZB_RETURN_IF_ERROR(layer_compute_->forward(l));
    }
    if (check) ZB_RETURN_IF_ERROR(check_layer(l));
    if (l + slots_ < L) {
      ZB_RETURN_IF_ERROR(engine_->after_compute(compute_.stream()));  // layer l is done with the slot
      loaded[size_t(l + slots_)] = load(l + slots_);
    }
  }
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  times_.copies = engine_->take_stats();
  return Status::ok();
}

// What the layer computed on, element by element against the host copy it was loaded from.
Status OffloadWeights::check_layer(int layer) {
  const uint64_t first = offsets_[size_t(layer)], count = offsets_[size_t(layer) + 1] - first;
  Buffer& slot = slot_[size_t(layer % slots_)];
  if (corrupt_ && layer == 0) {  // test only: the load delivered one wrong element
    const Bf16 one = float_to_bf16(1.0f);
    ZB_RETURN_IF_ERROR(copy_bytes(slot.data(), slot.kind(), &one, MemKind::host, 2));
  }
  std::vector<Bf16> seen(count);
  ZB_RETURN_IF_ERROR(compute_.synchronize());
  ZB_RETURN_IF_ERROR(copy_bytes(seen.data(), MemKind::host, slot.data(), slot.kind(), count * 2));
  const Bf16* want = host_weights_.as<Bf16>() + first;
  for (uint64_t i = 0; i < count; ++i) mismatches_ += seen[i].bits != want[i].bits;
  return Status::ok();
}

Status OffloadWeights::copy_alone() {
  size_t largest = 0;
  for (size_t l = 0; l + 1 < offsets_.size(); ++l)
    if (offsets_[l + 1] - offsets_[l] > offsets_[largest + 1] - offsets_[largest]) largest = l;
  return engine_->wait(load(int(largest)));
}

}  // namespace zb
