// Sweep: the message sizes of a benchmark, from min to max by a factor (nccl-tests' -f).
#pragma once

#include <cstdint>
#include <vector>

namespace zb {

// min, min*f, min*f^2, ... up to and including max (max always included when >= min).
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, double factor);

}  // namespace zb
