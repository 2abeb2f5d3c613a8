// Staggered arrays: several arrays carved from one allocation so that no two alias in the
// core's load/store disambiguation.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/core/device.h"

namespace zb {

// Array i starts (4 KiB + 256 B) x i after the previous one ends (rounded up to 4 KiB).
// Separately mapped buffers of one power-of-two size sit at addresses that agree in every bit
// below that size, and on a Zen 4 guest that alone made AdamW over 64M parameters 2x slower
// (27 against 54 GB/s): staggered, the kernel is measured, not the aliasing of its streams.
// 256 B keeps every array aligned for 16-byte and 64-byte accesses.
class StaggeredArrays {
 public:
  Status allocate(MemKind kind, const std::vector<size_t>& bytes);
  template <typename T>
  T* as(size_t i) const { return reinterpret_cast<T*>(buffer_.as<char>() + offsets_[i]); }
  MemKind kind() const { return buffer_.kind(); }

 private:
  Buffer buffer_;
  std::vector<size_t> offsets_;
};

}  // namespace zb
