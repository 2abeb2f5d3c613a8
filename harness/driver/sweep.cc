// Sweep: geometric sizes with the last one pinned to max.
#include "harness/driver/sweep.h"

#include <cmath>

namespace zb {

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, double factor) {
  std::vector<uint64_t> sizes;
  if (min_bytes > max_bytes) return sizes;
  if (factor <= 1.0) return {min_bytes};
  double b = double(min_bytes);
  while (b <= double(max_bytes) * (1 + 1e-9)) {
    uint64_t v = uint64_t(std::llround(b));
    if (sizes.empty() || v != sizes.back()) sizes.push_back(v);
    b *= factor;
  }
  if (sizes.back() != max_bytes) sizes.push_back(max_bytes);
  return sizes;
}

}  // namespace zb
