// Test helper: uniformly random FP32 values, shared by the CPU and CUDA kernel tests.
#pragma once

#include <random>
#include <vector>

namespace zb {

inline std::vector<float> random_values(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

}  // namespace zb
