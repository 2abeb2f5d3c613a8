// Fill and verify patterns for collectives.
#include "kernels/pattern.h"

#include "harness/core/bf16.h"

namespace zb {

static int contributor_stride(int ranks) { return ranks <= 64 ? 1 : (ranks + 63) / 64; }

double pattern_value(int rank, uint64_t index, int ranks) {
  int k = contributor_stride(ranks);
  if (k > 1 && (uint64_t(rank) + index) % uint64_t(k) != 0) return 0;
  return double(int((index * 7 + uint64_t(rank) * 3 + 1) % 5) - 2);
}

double pattern_sum(uint64_t index, int ranks) {
  double s = 0;
  for (int r = 0; r < ranks; ++r) s += pattern_value(r, index, ranks);
  return s;
}

double load_element(const void* buf, DType dtype, size_t i) {
  if (dtype == DType::bf16) return bf16_to_float(static_cast<const Bf16*>(buf)[i]);
  return static_cast<const float*>(buf)[i];
}

void store_element(void* buf, DType dtype, size_t i, double value) {
  if (dtype == DType::bf16) static_cast<Bf16*>(buf)[i] = float_to_bf16(float(value));
  else static_cast<float*>(buf)[i] = float(value);
}

void fill_pattern(void* buf, DType dtype, size_t count, int rank, uint64_t first, int ranks) {
  for (size_t i = 0; i < count; ++i) store_element(buf, dtype, i, pattern_value(rank, first + i, ranks));
}

void fill_poison(void* buf, DType dtype, size_t count) {
  for (size_t i = 0; i < count; ++i) store_element(buf, dtype, i, 1.0e6);
}

}  // namespace zb
