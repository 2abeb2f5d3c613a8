// BF16 GEMM with FP32 sums: the stand-in for a transformer layer's matrix compute.
#pragma once

#include <cstdint>

#include "harness/core/bf16.h"
#include "harness/core/dtype.h"

#if defined(ZB_HAVE_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "harness/core/status.h"
#endif

namespace zb {

// Every GEMM here computes C (m x n) = A (m x k) * B (k x n), all row-major and contiguous,
// A and B in BF16, C in FP32 or BF16 (`c_dtype`), products summed in FP32.
constexpr double gemm_flops(int64_t m, int64_t n, int64_t k) { return 2.0 * double(m) * n * k; }

// Blocked and multithreaded on the kernel pool (`threads` 0 = every hardware thread). A BF16 C
// is the FP32 result rounded to nearest even, bit-equal to float_to_bf16 of the FP32 C.
void gemm_cpu_bf16(const Bf16* a, const Bf16* b, void* c, DType c_dtype, int m, int n, int k,
                   int threads);

// Plain triple loop with double sums, for tests.
void gemm_reference_bf16(const Bf16* a, const Bf16* b, double* c, int m, int n, int k);

#if defined(ZB_HAVE_CUDA)
// cublasGemmEx on `stream` with CUBLAS_COMPUTE_32F; device pointers. Sets the handle's stream.
Status gemm_cuda_bf16(cublasHandle_t handle, const Bf16* a, const Bf16* b, void* c, DType c_dtype,
                      int m, int n, int k, cudaStream_t stream);
#endif

}  // namespace zb
