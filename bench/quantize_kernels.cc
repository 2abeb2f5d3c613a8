// The quantization kernels against the memory-bandwidth limit measured in the same run.
#include "bench/quantize_kernels.h"

#include <cstdio>

#include "harness/core/staggered_arrays.h"
#include "harness/driver/table.h"

namespace zb {
namespace {

const char* kernel_name(QuantKernel k) {
  return k == QuantKernel::quantize ? "quantize" : k == QuantKernel::dequantize ? "dequantize" : "reduce_requantize";
}

size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

std::vector<QuantSetup> quant_kernels(const std::vector<DType>& dtypes) {
  std::vector<QuantSetup> out;
  for (QuantKernel k : {QuantKernel::quantize, QuantKernel::dequantize})
    for (DType d : dtypes) {
      out.push_back({k, QuantFormat::int8, d, kWeightQuantBlock, 0});
      out.push_back({k, QuantFormat::int4, d, kGradQuantBlock, 0});
      out.push_back({k, QuantFormat::fp8, d, 0, 0});
    }
  for (QuantFormat f : {QuantFormat::int8, QuantFormat::int4})
    out.push_back({QuantKernel::reduce_requantize, f, DType::f32, kGradQuantBlock, kReduceInputs});
  return out;
}

std::string quant_benchmark_name(const QuantSetup& s, uint64_t params, const char* impl) {
  std::string name = std::string(kernel_name(s.kernel)) + "/params:" + std::to_string(params) +
                     "/format:" + quant_format_name(s.format);
  if (s.format != QuantFormat::fp8) name += "/block:" + std::to_string(s.block);
  if (s.kernel == QuantKernel::reduce_requantize) name += "/inputs:" + std::to_string(s.inputs);
  else name += std::string("/dtype:") + dtype_name(s.dtype);
  return name + "/impl:" + impl;
}

// Buffers: the values (FP32 master or BF16 weights, whichever the dtype says), an output for
// dequantized values, `inputs` quantized buffers (codes, then scales; for FP8 the "scale" slot
// holds the tensor's amax, what the receiver needs), and the reduction's output.
Status quant_kernel_benchmark(Run& run, Compute& compute, const QuantSetup& s, uint64_t params,
                              KernelResult* out) {
  const MemKind kind = compute.kind();
  [[maybe_unused]] const bool gpu = kind == MemKind::device;  // unread without CUDA
  const bool fp8 = s.format == QuantFormat::fp8;
  const bool reduce = s.kernel == QuantKernel::reduce_requantize;
  const QuantFormat f = s.format;
  const DType dtype = s.dtype;
  const size_t n = params, dsz = dtype_size(dtype);
  const size_t code_bytes = round64(quant_code_bytes(f, n));
  const size_t scale_bytes = round64(4 * (fp8 ? 1 : quant_blocks(n, s.block)));
  const int inputs = reduce ? s.inputs : 1;
  enum { kMaster, kWeights, kValuesOut, kCodes, kScales, kReducedCodes, kReducedScales };
  StaggeredArrays a;
  ZB_RETURN_IF_ERROR(a.allocate(kind, {n * 4, n * 2, reduce ? 0 : n * dsz, size_t(inputs) * code_bytes,
                                       size_t(inputs) * scale_bytes, reduce ? code_bytes : 0,
                                       reduce ? scale_bytes : 0}));
  float* master = a.as<float>(kMaster);
  Bf16* weights = a.as<Bf16>(kWeights);
  const void* x = dtype == DType::f32 ? static_cast<const void*>(master) : weights;
  void* values_out = a.as<void>(kValuesOut);
  uint8_t* codes = a.as<uint8_t>(kCodes);
  float* scales = a.as<float>(kScales);
  // Every page written before it is timed (see optimizer_kernels.cc).
  ZB_RETURN_IF_ERROR(compute.init_weights(master, weights, n, 0));
  if (!reduce) ZB_RETURN_IF_ERROR(compute.zero(values_out, n * dsz));
  if (reduce) ZB_RETURN_IF_ERROR(compute.zero(a.as<void>(kReducedCodes), code_bytes));
  if (reduce) ZB_RETURN_IF_ERROR(compute.zero(a.as<void>(kReducedScales), scale_bytes));

  const int threads = run.driver().cpu_threads_per_rank();
#ifdef ZB_HAVE_CUDA
  cudaStream_t stream = static_cast<cudaStream_t>(compute.stream());
#endif
  auto quantize = [&](uint8_t* c, float* sc) -> Status {
#ifdef ZB_HAVE_CUDA
    if (gpu && fp8) {
      ZB_RETURN_IF_ERROR(fp8_amax_cuda(x, dtype, n, sc, stream));
      return fp8_quantize_cuda(x, dtype, n, sc, c, stream);
    }
    if (gpu) return block_quantize_cuda(x, dtype, n, f, s.block, c, sc, stream);
#endif
    if (fp8) {
      sc[0] = fp8_amax_cpu(x, dtype, n, threads);
      fp8_quantize_cpu(x, dtype, n, sc[0], c, threads);
    } else {
      block_quantize_cpu(x, dtype, n, f, s.block, c, sc, threads);
    }
    return Status::ok();
  };
  auto dequantize = [&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (gpu && fp8) return fp8_dequantize_cuda(codes, n, scales, values_out, dtype, stream);
    if (gpu) return block_dequantize_cuda(codes, scales, n, f, s.block, values_out, dtype, stream);
#endif
    if (fp8) fp8_dequantize_cpu(codes, n, scales[0], values_out, dtype, threads);
    else block_dequantize_cpu(codes, scales, n, f, s.block, values_out, dtype, threads);
    return Status::ok();
  };
  const QuantInputs in{codes, code_bytes, scales, scale_bytes / 4, inputs};
  uint8_t* reduced_codes = a.as<uint8_t>(kReducedCodes);
  float* reduced_scales = a.as<float>(kReducedScales);
  auto reduce_call = [&]() -> Status {
#ifdef ZB_HAVE_CUDA
    if (gpu) return block_reduce_cuda(in, n, f, s.block, reduced_codes, reduced_scales, stream);
#endif
    block_reduce_cpu(in, n, f, s.block, reduced_codes, reduced_scales, threads);
    return Status::ok();
  };
  // Real codes in every input before anything reads them.
  for (int j = 0; j < inputs; ++j)
    ZB_RETURN_IF_ERROR(quantize(codes + size_t(j) * code_bytes, scales + size_t(j) * scale_bytes / 4));
  ZB_RETURN_IF_ERROR(compute.synchronize());

  KernelUnderTest k;
  k.call = [&]() -> Status {
    if (s.kernel == QuantKernel::quantize) ZB_RETURN_IF_ERROR(quantize(codes, scales));
    else if (s.kernel == QuantKernel::dequantize) ZB_RETURN_IF_ERROR(dequantize());
    else ZB_RETURN_IF_ERROR(reduce_call());
    return compute.synchronize();
  };
  k.elements = params;
  const size_t quantized = code_bytes + scale_bytes;
  k.footprint_bytes = reduce ? size_t(inputs + 1) * quantized : n * dsz + quantized;
  k.bytes_per_element = s.kernel == QuantKernel::quantize     ? quantize_bytes_per_elem(f, dtype, s.block)
                        : s.kernel == QuantKernel::dequantize ? dequantize_bytes_per_elem(f, dtype, s.block)
                                                              : reduce_bytes_per_elem(f, inputs, s.block);
  return kernel_against_limit(run, compute, k, out);
}

void add_quant_benchmarks(Driver& driver, Compute& compute, const std::vector<uint64_t>& sizes,
                          const std::vector<DType>& dtypes, const char* impl, std::vector<QuantRow>* rows) {
  for (const QuantSetup& q : quant_kernels(dtypes))
    for (uint64_t p : sizes)
      driver.add(quant_benchmark_name(q, p, impl), [&compute, q, p, rows](Run& run) -> Status {
        KernelResult r;
        ZB_RETURN_IF_ERROR(quant_kernel_benchmark(run, compute, q, p, &r));
        rows->push_back({q, p, r});
        return Status::ok();
      });
}

void print_quant_table(const std::vector<QuantRow>& rows, const char* impl) {
  if (rows.empty()) return;
  std::printf("\n# zb_optimizer: quantization kernels (%s)\n", impl);
  Table t({"kernel", "format", "block", "inputs", "dtype", "impl", "params", "time(ms)", "Gparams/s", "GB/s",
           "limit GB/s", "limit by", "fraction"});
  for (const QuantRow& q : rows) {
    const QuantSetup& s = q.setup;
    const bool reduce = s.kernel == QuantKernel::reduce_requantize;
    t.add_row({kernel_name(s.kernel), quant_format_name(s.format),
               s.format == QuantFormat::fp8 ? "tensor" : std::to_string(s.block), reduce ? std::to_string(s.inputs) : "1",
               reduce ? "-" : dtype_name(s.dtype), impl, std::to_string(q.params), fmt(q.r.kernel_s * 1e3, 3),
               fmt(q.r.params_per_s / 1e9, 3), fmt(q.r.gbps, 2), fmt(q.r.limit_gbps, 2), q.r.limit_pattern,
               fmt(q.r.frac, 3)});
  }
  t.print(stdout);
  std::printf("# GB/s by each kernel's byte model (kernels/quantize/quantize.h): values in, codes and FP32 "
              "block scales out (and back); FP8 reads its values twice (the tensor's amax, then the cast); the "
              "reduction reads every input's codes and scales and writes one set; limit: the fastest bandwidth "
              "probe over arrays of the same total size\n");
}

}  // namespace zb
