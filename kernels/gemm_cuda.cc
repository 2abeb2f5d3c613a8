// The cuBLAS BF16 GEMM: row-major C = A * B computed as column-major C^T = B^T * A^T.
#include "kernels/gemm.h"

namespace zb {

namespace {

#define ZB_CUBLAS_CHECK(call)                                                        \
  do {                                                                               \
    cublasStatus_t zb_rc_ = (call);                                                  \
    if (zb_rc_ != CUBLAS_STATUS_SUCCESS)                                             \
      return ::zb::Status::error(::zb::where(__FILE__, __LINE__) +                   \
                                 #call " failed: " + cublasGetStatusString(zb_rc_)); \
  } while (0)

}  // namespace

Status gemm_cuda_bf16(cublasHandle_t handle, const Bf16* a, const Bf16* b, void* c, DType c_dtype,
                      int m, int n, int k, cudaStream_t stream) {
  ZB_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm_cuda_bf16: negative size");
  if (m == 0 || n == 0) return Status::ok();
  const float alpha = 1.0f, beta = 0.0f;
  ZB_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // cuBLAS is column-major: a row-major X is X^T to it. So ask for C^T (n x m) = B^T (n x k) *
  // A^T (k x m), whose leading dimensions are the row lengths n, k and n (cuBLAS wants at least
  // 1 even when k is 0, which leaves C = beta * C = 0).
  cudaDataType_t c_type = c_dtype == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  const int lda = n, ldb = k > 0 ? k : 1, ldc = n;
  ZB_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF,
                               lda, a, CUDA_R_16BF, ldb, &beta, c, c_type, ldc, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
  return Status::ok();
}

}  // namespace zb
