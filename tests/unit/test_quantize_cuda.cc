// The CUDA quantization kernels against the references, bit for bit: the same per-element math
// (quant_math.h) with every operation rounded on its own, so nothing may differ.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/test_quantize_values.h"

namespace zb {
namespace {

bool have_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define ZB_SKIP_WITHOUT_GPU()         \
  if (!have_gpu()) {                  \
    GTEST_SKIP() << "no CUDA device"; \
  }

#define ZB_ASSERT_OK(expr)                 \
  do {                                     \
    ::zb::Status zb_s_ = (expr);           \
    ASSERT_TRUE(zb_s_) << zb_s_.message(); \
  } while (0)

// Device bytes with `pad` spare bytes in front, so a test can misalign them.
struct DeviceBytes {
  char* base = nullptr;
  size_t size = 0, pad = 0;
  DeviceBytes(const void* host, size_t bytes, size_t pad_bytes) : size(bytes), pad(pad_bytes) {
    EXPECT_EQ(cudaMalloc(&base, bytes + pad + 1), cudaSuccess);
    EXPECT_EQ(cudaMemset(base, 0x5a, bytes + pad + 1), cudaSuccess);
    if (host) {
      EXPECT_EQ(cudaMemcpy(base + pad, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~DeviceBytes() { cudaFree(base); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(base + pad); }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> out(size);
    EXPECT_EQ(cudaMemcpy(out.data(), base + pad, size, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

void check_block(QuantFormat f, DType dtype, size_t n, size_t block, size_t pad, std::mt19937& rng) {
  SCOPED_TRACE(quant_trace(f, dtype, n, block) + " pad=" + std::to_string(pad));
  const QuantInput x = make_quant_input(dtype, varied_values(n, rng));
  Quantized ref(f, n, block);
  block_quantize_reference(x.data(), dtype, n, f, block, ref.codes.data(), ref.scales.data());
  DeviceBytes d_x(x.data(), n * dtype_size(dtype), pad * dtype_size(dtype));
  DeviceBytes d_codes(nullptr, ref.codes.size(), pad), d_scales(nullptr, ref.scales.size() * 4, 0);
  ZB_ASSERT_OK(block_quantize_cuda(d_x.as<void>(), dtype, n, f, block, d_codes.as<uint8_t>(),
                                   d_scales.as<float>(), nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(d_codes.get(), ref.codes);
  ASSERT_EQ(d_scales.get(), bytes_of(ref.scales));
  // Back from the reference's codes.
  std::vector<uint8_t> want(n * dtype_size(dtype));
  block_dequantize_reference(ref.codes.data(), ref.scales.data(), n, f, block, want.data(), dtype);
  DeviceBytes d_in(ref.codes.data(), ref.codes.size(), pad), d_sc(ref.scales.data(), ref.scales.size() * 4, 0);
  DeviceBytes d_out(nullptr, want.size(), pad * dtype_size(dtype));
  ZB_ASSERT_OK(block_dequantize_cuda(d_in.as<uint8_t>(), d_sc.as<float>(), n, f, block, d_out.as<void>(), dtype, nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(d_out.get(), want);
}

TEST(QuantizeCuda, BlockQuantizeAndDequantizeMatchTheReference) {
  ZB_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  for (QuantFormat f : {QuantFormat::int8, QuantFormat::int4})
    for (DType dtype : kQuantDTypes)
      for (size_t n : {size_t(1), size_t(7), size_t(4097), size_t(100003)})
        for (size_t block : {size_t(2), size_t(64), size_t(4096)}) check_block(f, dtype, n, block, n % 3, rng);
  check_block(QuantFormat::int8, DType::bf16, 1001, 33, 1, rng);
  // More blocks than the grid has thread blocks: each takes several.
  check_block(QuantFormat::int4, DType::bf16, size_t(1) << 23, 512, 0, rng);
}

TEST(QuantizeCuda, ReductionMatchesTheReference) {
  ZB_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  for (QuantFormat f : {QuantFormat::int8, QuantFormat::int4})
    for (int count : {1, 3, 8})
      for (size_t n : {size_t(7), size_t(10001)}) {
        const size_t block = 64, code_stride = quant_code_bytes(f, n) + 5, scale_stride = quant_blocks(n, block) + 3;
        std::vector<uint8_t> codes(code_stride * size_t(count), 0x77);
        std::vector<float> scales(scale_stride * size_t(count), 1e30f);
        for (int j = 0; j < count; ++j) {
          std::vector<float> v = varied_values(n, rng);
          block_quantize_reference(v.data(), DType::f32, n, f, block, codes.data() + size_t(j) * code_stride,
                                   scales.data() + size_t(j) * scale_stride);
        }
        Quantized ref(f, n, block);
        const QuantInputs host{codes.data(), code_stride, scales.data(), scale_stride, count};
        block_reduce_reference(host, n, f, block, ref.codes.data(), ref.scales.data());
        DeviceBytes d_codes(codes.data(), codes.size(), 0), d_scales(scales.data(), scales.size() * 4, 0);
        DeviceBytes d_out(nullptr, ref.codes.size(), 0), d_out_scales(nullptr, ref.scales.size() * 4, 0);
        const QuantInputs dev{d_codes.as<uint8_t>(), code_stride, d_scales.as<float>(), scale_stride, count};
        ZB_ASSERT_OK(block_reduce_cuda(dev, n, f, block, d_out.as<uint8_t>(), d_out_scales.as<float>(), nullptr));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(d_out.get(), ref.codes) << quant_format_name(f) << " inputs " << count << " n " << n;
        ASSERT_EQ(d_out_scales.get(), bytes_of(ref.scales));
      }
}

TEST(QuantizeCuda, Fp8MatchesTheReference) {
  ZB_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (DType dtype : kQuantDTypes)
    for (size_t n : {size_t(1), size_t(7), size_t(100003), size_t(1) << 22}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const QuantInput x = make_quant_input(dtype, varied_values(n, rng));
      const float amax = fp8_amax_reference(x.data(), dtype, n);
      std::vector<uint8_t> codes(n);
      fp8_quantize_reference(x.data(), dtype, n, amax, codes.data());
      std::vector<uint8_t> want(n * dtype_size(dtype));
      fp8_dequantize_reference(codes.data(), n, amax, want.data(), dtype);
      DeviceBytes d_x(x.data(), n * dtype_size(dtype), 0), d_amax(nullptr, 4, 0), d_codes(nullptr, n, 1);
      ZB_ASSERT_OK(fp8_amax_cuda(d_x.as<void>(), dtype, n, d_amax.as<float>(), nullptr));
      ZB_ASSERT_OK(fp8_quantize_cuda(d_x.as<void>(), dtype, n, d_amax.as<float>(), d_codes.as<uint8_t>(), nullptr));
      DeviceBytes d_out(nullptr, want.size(), 0);
      ZB_ASSERT_OK(fp8_dequantize_cuda(d_codes.as<uint8_t>(), n, d_amax.as<float>(), d_out.as<void>(), dtype, nullptr));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(d_amax.get(), bytes_of(std::vector<float>{amax}));
      ASSERT_EQ(d_codes.get(), codes);
      ASSERT_EQ(d_out.get(), want);
    }
}

TEST(QuantizeCuda, RejectsABlockSizeTheFormatCannotTake) {
  // Checked before anything reaches the GPU, so this runs without one.
  EXPECT_FALSE(block_quantize_cuda(nullptr, DType::bf16, 10, QuantFormat::int4, 3, nullptr, nullptr, nullptr));
  EXPECT_FALSE(block_dequantize_cuda(nullptr, nullptr, 10, QuantFormat::int8, 0, nullptr, DType::bf16, nullptr));
  EXPECT_FALSE(block_reduce_cuda(QuantInputs{}, 10, QuantFormat::fp8, 64, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace zb
