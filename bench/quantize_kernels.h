// zb_optimizer's quantization kernels (kernels/quantize/): quantize, dequantize and qgZ's
// dequantize-reduce-requantize, each against the fastest bandwidth probe of the same memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/optimizer_kernels.h"
#include "kernels/quantize/quantize.h"

namespace zb {

enum class QuantKernel { quantize, dequantize, reduce_requantize };

struct QuantSetup {
  QuantKernel kernel = QuantKernel::quantize;
  QuantFormat format = QuantFormat::int8;
  DType dtype = DType::bf16;  // of the values quantized, or dequantized into (not the reduction's)
  size_t block = 0;           // int8 and int4: elements per scale
  int inputs = 0;             // reduce_requantize: the quantized buffers summed
};

struct QuantRow {
  QuantSetup setup;
  uint64_t params;
  KernelResult r;
};

// qgZ's first reduction sums one block from each rank of a node: 8, as on a DGX-style node.
constexpr int kReduceInputs = 8;

// The family over `dtypes`: quantize and dequantize in INT8 with qwZ's block, INT4 with qgZ's
// block and FP8; the reduction of kReduceInputs INT8 or INT4 buffers, qgZ's block.
std::vector<QuantSetup> quant_kernels(const std::vector<DType>& dtypes);

// "quantize/params:1048576/format:int8/block:4096/dtype:bf16/impl:cpu"; FP8 has no block, the
// reduction has inputs:K and no dtype.
std::string quant_benchmark_name(const QuantSetup& s, uint64_t params, const char* impl);

Status quant_kernel_benchmark(Run& run, Compute& compute, const QuantSetup& s, uint64_t params,
                              KernelResult* out);

// Registers every kernel of quant_kernels(dtypes) at every size; results land in `rows`.
void add_quant_benchmarks(Driver& driver, Compute& compute, const std::vector<uint64_t>& sizes,
                          const std::vector<DType>& dtypes, const char* impl, std::vector<QuantRow>* rows);

// Rank 0's console table of `rows`, with what GB/s counts.
void print_quant_table(const std::vector<QuantRow>& rows, const char* impl);

}  // namespace zb
