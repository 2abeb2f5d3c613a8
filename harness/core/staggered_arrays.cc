// Staggered arrays: the offsets, and one allocation for all of them.
#include "harness/core/staggered_arrays.h"

namespace zb {

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

}  // namespace zb
