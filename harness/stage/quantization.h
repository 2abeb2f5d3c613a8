// What a stage's collectives send quantized: the weights it gathers (ZeRO++'s qwZ, INT8 blocks;
// torchtitan's FP8 with one scale per tensor) and the gradients it reduces (ZeRO++'s qgZ, INT8 or
// INT4 blocks through a hierarchical all-to-all), and the bytes an element then takes on the wire.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kernels/quantize/quantize.h"

namespace zb {

enum class WeightQuant { none, int8, fp8 };
enum class GradQuant { none, int8, int4 };

struct Quantization {
  WeightQuant weights = WeightQuant::none;
  GradQuant grads = GradQuant::none;
  bool any() const { return weights != WeightQuant::none || grads != GradQuant::none; }
  bool operator==(const Quantization& o) const { return weights == o.weights && grads == o.grads; }
};

constexpr const char* weight_quant_name(WeightQuant q) {
  return q == WeightQuant::int8 ? "int8" : q == WeightQuant::fp8 ? "fp8" : "none";
}
constexpr const char* grad_quant_name(GradQuant q) {
  return q == GradQuant::int8 ? "int8" : q == GradQuant::int4 ? "int4" : "none";
}
inline std::vector<std::pair<std::string, WeightQuant>> weight_quant_choices() {
  return {{"none", WeightQuant::none}, {"int8", WeightQuant::int8}, {"fp8", WeightQuant::fp8}};
}
inline std::vector<std::pair<std::string, GradQuant>> grad_quant_choices() {
  return {{"none", GradQuant::none}, {"int8", GradQuant::int8}, {"int4", GradQuant::int4}};
}
// The kernels' format of each (meaningless for none).
constexpr QuantFormat quant_format(WeightQuant q) { return q == WeightQuant::fp8 ? QuantFormat::fp8 : QuantFormat::int8; }
constexpr QuantFormat quant_format(GradQuant q) { return q == GradQuant::int4 ? QuantFormat::int4 : QuantFormat::int8; }

// A quantized piece of n elements as it travels: block codes padded to a whole 4-byte word,
// then one FP32 scale per block of `block` elements (FP8: the codes alone; its scale comes from
// the tensor's amax, exchanged apart). Always a multiple of 4 bytes, so the piece travels as
// bytes / 2 BF16 elements and counts in volume as that many: Ψ of BF16 elements.
constexpr size_t quant_record_bytes(QuantFormat f, size_t n, size_t block) {
  return (quant_code_bytes(f, n) + 3) / 4 * 4 + (f == QuantFormat::fp8 ? 0 : 4 * quant_blocks(n, block));
}
// The same per element as the formulas state it (whole blocks, no padding): codes plus a scale
// shared by `block` elements.
constexpr double quant_bytes_per_element(QuantFormat f, size_t block) {
  return (f == QuantFormat::int4 ? 0.5 : 1.0) + (f == QuantFormat::fp8 ? 0.0 : 4.0 / double(block));
}

}  // namespace zb
