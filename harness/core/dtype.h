// Element types of gradients and buffers, with their sizes, names and a strict parser.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace zb {

enum class DType { f32, bf16 };

constexpr size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

// These names appear in benchmark names (dtype:bf16) and flags, so they are part of the contract.
constexpr const char* dtype_name(DType t) { return t == DType::f32 ? "fp32" : "bf16"; }

// Every dtype by name, for flags.
inline std::vector<std::pair<std::string, DType>> dtype_choices() {
  return {{dtype_name(DType::bf16), DType::bf16}, {dtype_name(DType::f32), DType::f32}};
}

// Accepts exactly the names dtype_name returns; anything else is false so the caller can say
// which values are allowed.
inline bool parse_dtype(const std::string& text, DType* out) {
  if (text == "fp32") {
    *out = DType::f32;
    return true;
  }
  if (text == "bf16") {
    *out = DType::bf16;
    return true;
  }
  return false;
}

}  // namespace zb
