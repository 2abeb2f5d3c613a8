// Device: where buffers live (host, pinned host, GPU) and what hardware this process sees.
#pragma once

#include <cstddef>
#include <string>

#include "harness/core/status.h"

namespace zb {

// reserved: address space with no memory behind it (never touched), for running a step's
// schedule without its state, to record which collectives it issues (zb_predict).
enum class MemKind { host, pinned, device, reserved };
const char* mem_kind_name(MemKind kind);

// An owned allocation. Host memory is mapped fresh (resident-set measurements see whole
// pages arrive on first touch) and 256-byte aligned, staggered within its first page.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  static Status allocate(MemKind kind, size_t bytes, Buffer* out);

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  MemKind kind() const { return kind_; }
  void release();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0, mapped_ = 0, stagger_ = 0;
  MemKind kind_ = MemKind::host;
};

// Copies between any two kinds (cudaMemcpy when either side is a GPU buffer), done when it
// returns: the copy has landed before any stream's next work.
Status copy_bytes(void* dst, MemKind dst_kind, const void* src, MemKind src_kind, size_t bytes);
// Writes zeros, done when it returns: every page of a fresh buffer made resident, so that
// nothing timed later meets a first touch. Nothing to do for reserved memory.
Status zero_bytes(void* dst, MemKind kind, size_t bytes);

bool cuda_built();
// 0 when this build has no CUDA, or when the driver is missing (cudaGetDeviceCount fails).
int visible_gpu_count();
Status select_gpu(int local_rank);
std::string gpu_model();       // "" without a GPU
std::string cuda_version();    // "" without CUDA
std::string cpu_model();
std::string host_name();

}  // namespace zb
