// Status: errors returned up the stack with the call, file and line that failed; only main exits.
#pragma once

#include <string>
#include <utility>

namespace zb {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) { return Status(std::move(msg)); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return msg_; }

  // Adds context in front: "rank 1: all_reduce of 4096 bytes: <message>".
  Status context(const std::string& what) const {
    return failed_ ? Status(what + ": " + msg_) : *this;
  }

 private:
  explicit Status(std::string msg) : failed_(true), msg_(std::move(msg)) {}
  bool failed_ = false;
  std::string msg_;
};

// "harness/comm_mpi.cc:88: ": the place a check failed. Inline, so the kernels below the
// harness can use the check macros without linking it.
inline std::string where(const char* file, int line) {
  std::string f(file);
  size_t slash = f.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    size_t prev = f.rfind('/', slash - 1);
    f = f.substr(prev == std::string::npos ? 0 : prev + 1);
  }
  return f + ":" + std::to_string(line) + ": ";
}

}  // namespace zb

#define ZB_RETURN_IF_ERROR(expr)         \
  do {                                   \
    ::zb::Status zb_status_ = (expr);    \
    if (!zb_status_) return zb_status_;  \
  } while (0)

#define ZB_CHECK(cond, msg)                                                          \
  do {                                                                               \
    if (!(cond)) return ::zb::Status::error(::zb::where(__FILE__, __LINE__) + msg);  \
  } while (0)

// MPI: the communicators are set to MPI_ERRORS_RETURN so a failed call comes back here.
#define ZB_MPI_CHECK(call)                                                                   \
  do {                                                                                       \
    int zb_rc_ = (call);                                                                     \
    if (zb_rc_ != MPI_SUCCESS) {                                                             \
      char zb_buf_[MPI_MAX_ERROR_STRING];                                                    \
      int zb_len_ = 0;                                                                       \
      MPI_Error_string(zb_rc_, zb_buf_, &zb_len_);                                           \
      return ::zb::Status::error(::zb::where(__FILE__, __LINE__) + #call " failed: " +      \
                                 std::string(zb_buf_, size_t(zb_len_)));                     \
    }                                                                                        \
  } while (0)

#define ZB_CUDA_CHECK(call)                                                                  \
  do {                                                                                       \
    cudaError_t zb_rc_ = (call);                                                             \
    if (zb_rc_ != cudaSuccess)                                                               \
      return ::zb::Status::error(::zb::where(__FILE__, __LINE__) + #call " failed: " +      \
                                 cudaGetErrorString(zb_rc_));                                \
  } while (0)

#define ZB_NCCL_CHECK(call)                                                                  \
  do {                                                                                       \
    ncclResult_t zb_rc_ = (call);                                                            \
    if (zb_rc_ != ncclSuccess)                                                               \
      return ::zb::Status::error(::zb::where(__FILE__, __LINE__) + #call " failed: " +      \
                                 ncclGetErrorString(zb_rc_));                                \
  } while (0)
