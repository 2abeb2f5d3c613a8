// Memory tracker: every allocation of a training step by category, and an independent
// measurement of what the resident model state really occupies (resident-set growth on the
// host, cudaMemGetInfo on a GPU).
#pragma once

#include <array>
#include <cstdint>

#include "harness/core/device.h"
#include "harness/core/status.h"

namespace zb {

enum class MemCategory { weights, grads, master, moments, transient };
constexpr int kMemCategories = 5;
const char* mem_category_name(MemCategory c);

class MemoryTracker {
 public:
  explicit MemoryTracker(MemKind kind) : kind_(kind) {}

  // Allocates and touches every page (zero fill), so the memory is resident when this
  // returns and the independent measurement sees it.
  Status allocate(MemCategory category, size_t bytes, Buffer* out);
  // Transient buffers (buckets, gathered layers) come and go; the tracker keeps the peak.
  void release_transient(Buffer* buf);

  size_t bytes(MemCategory c) const { return bytes_[size_t(c)]; }
  size_t resident_state_bytes() const;  // weights + grads + master + moments
  size_t transient_peak_bytes() const { return transient_peak_; }
  MemKind kind() const { return kind_; }

 private:
  MemKind kind_;
  std::array<size_t, kMemCategories> bytes_{};
  size_t transient_peak_ = 0;
};

// What the system says this process uses right now: resident-set size on the host
// (/proc/self/statm), or device memory in use on the current GPU (total - free).
Status used_memory_bytes(MemKind kind, int64_t* out);

}  // namespace zb
