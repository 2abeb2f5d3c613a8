// Memory tracker: category sums, the transient peak, and the system's own view of usage.
#include "harness/core/memory_tracker.h"

#include <unistd.h>

#include <fstream>

#ifdef ZB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace zb {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::weights: return "weights";
    case MemCategory::grads: return "grads";
    case MemCategory::master: return "master";
    case MemCategory::moments: return "moments";
    case MemCategory::transient: return "transient";
  }
  return "?";
}

Status MemoryTracker::allocate(MemCategory category, size_t bytes, Buffer* out) {
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind_, bytes, out));
  ZB_RETURN_IF_ERROR(zero_bytes(out->data(), kind_, bytes));
  bytes_[size_t(category)] += bytes;
  if (category == MemCategory::transient)
    transient_peak_ = std::max(transient_peak_, bytes_[size_t(MemCategory::transient)]);
  return Status::ok();
}

void MemoryTracker::release_transient(Buffer* buf) {
  bytes_[size_t(MemCategory::transient)] -= buf->bytes();
  buf->release();
}

size_t MemoryTracker::resident_state_bytes() const {
  return bytes(MemCategory::weights) + bytes(MemCategory::grads) + bytes(MemCategory::master) +
         bytes(MemCategory::moments);
}

Status used_memory_bytes(MemKind kind, int64_t* out) {
  if (kind == MemKind::reserved) {  // nothing is ever resident
    *out = 0;
    return Status::ok();
  }
  if (kind == MemKind::device) {
#ifdef ZB_HAVE_CUDA
    size_t free_b = 0, total = 0;
    ZB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    *out = int64_t(total - free_b);
    return Status::ok();
#else
    return Status::error("device memory needs a CUDA build");
#endif
  }
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return Status::error("cannot read /proc/self/statm");
  *out = resident * int64_t(sysconf(_SC_PAGESIZE));
  return Status::ok();
}

}  // namespace zb
