// Fill and verify patterns for collectives: every element depends on rank and index, and
// every partial sum is a small integer, so the exact result is known whatever order or
// algorithm the library reduces in, for BF16 as for FP32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "harness/core/dtype.h"

namespace zb {

// What rank `rank` of `ranks` holds at global index `index`: an integer in [-2, 2]. For
// more than 64 ranks only every K-th rank contributes to an element, so no sum exceeds
// 128 in magnitude and stays exact in BF16's 8-bit significand.
double pattern_value(int rank, uint64_t index, int ranks);

// Writes pattern_value(rank, first + i, ranks) for i in [0, count).
void fill_pattern(void* buf, DType dtype, size_t count, int rank, uint64_t first, int ranks);

// Sum over all ranks of pattern_value(r, index, ranks): what a reduction must produce.
double pattern_sum(uint64_t index, int ranks);

// Fills with a value no pattern produces, so an output never written is caught.
void fill_poison(void* buf, DType dtype, size_t count);

// Reads element i as a double.
double load_element(const void* buf, DType dtype, size_t i);
void store_element(void* buf, DType dtype, size_t i, double value);

}  // namespace zb
