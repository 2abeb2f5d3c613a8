// Device: buffers and hardware detection; the CUDA parts compile only with ZB_HAVE_CUDA.
#include "harness/core/device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#ifdef ZB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace zb {

const char* mem_kind_name(MemKind kind) {
  switch (kind) {
    case MemKind::host: return "host";
    case MemKind::pinned: return "pinned";
    case MemKind::device: return "device";
    case MemKind::reserved: return "reserved";
  }
  return "?";
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(mapped_, other.mapped_);
    std::swap(stagger_, other.stagger_);
    std::swap(kind_, other.kind_);
  }
  return *this;
}

void Buffer::release() {
  if (!ptr_) return;
  if (kind_ == MemKind::host || kind_ == MemKind::reserved)
    munmap(static_cast<char*>(ptr_) - stagger_, mapped_);
#ifdef ZB_HAVE_CUDA
  else if (kind_ == MemKind::device) cudaFree(ptr_);
  else cudaFreeHost(ptr_);
#endif
  ptr_ = nullptr;
  bytes_ = 0;
}

Status Buffer::allocate(MemKind kind, size_t bytes, Buffer* out) {
  out->release();
  size_t n = bytes == 0 ? 1 : bytes;  // a zero-length view still needs a valid pointer
  void* p = nullptr;
  size_t mapped = 0, stagger = 0;
  if (kind == MemKind::reserved) {
    // PROT_NONE and no swap reserved: a model of any size costs address space only, and a
    // stray access faults instead of reading made-up data.
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    mapped = (n + page - 1) / page * page;
    p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return Status::error(where(__FILE__, __LINE__) + "reserving " + std::to_string(bytes) +
                           " bytes of address space failed");
  } else if (kind == MemKind::host) {
    // Fresh pages from mmap rather than malloc, which may hand back memory that is already
    // resident: the resident-set measurement of model state must see every byte arrive.
    // Successive buffers start 256 B further into their first page: arrays whose addresses
    // agree in all low 12 bits alias in the core's load/store disambiguation, which halved
    // a fused Adam over separately mapped arrays on a Zen guest.
    static std::atomic<unsigned> count{0};
    stagger = size_t(count++ % 16) * 256;
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    mapped = (n + stagger + page - 1) / page * page;
    p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return Status::error(where(__FILE__, __LINE__) + "mmap of " + std::to_string(bytes) +
                           " bytes failed");
    p = static_cast<char*>(p) + stagger;
  } else {
#ifdef ZB_HAVE_CUDA
    if (kind == MemKind::device) ZB_CUDA_CHECK(cudaMalloc(&p, n));
    else ZB_CUDA_CHECK(cudaMallocHost(&p, n));
#else
    return Status::error(std::string(mem_kind_name(kind)) +
                         " memory needs a CUDA build (configured without CUDA)");
#endif
  }
  out->ptr_ = p;
  out->mapped_ = mapped;
  out->stagger_ = stagger;
  out->bytes_ = bytes;
  out->kind_ = kind;
  return Status::ok();
}

Status copy_bytes(void* dst, MemKind dst_kind, const void* src, MemKind src_kind, size_t bytes) {
  if (bytes == 0) return Status::ok();
  if (dst_kind != MemKind::device && src_kind != MemKind::device) {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
#ifdef ZB_HAVE_CUDA
  ZB_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  // cudaMemcpy may return before its copy lands: one from pageable memory once the data is
  // staged, one between device buffers at once. A collective on NCCL's own stream issued next
  // then raced the copy (an H200 found 1 and 4 MiB outputs part poison); waiting here orders
  // every copy before whatever any stream does after it.
  ZB_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::ok();
#else
  return Status::error("device copy needs a CUDA build");
#endif
}

Status zero_bytes(void* dst, MemKind kind, size_t bytes) {
  if (bytes == 0 || kind == MemKind::reserved) return Status::ok();
  if (kind != MemKind::device) {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }
#ifdef ZB_HAVE_CUDA
  ZB_CUDA_CHECK(cudaMemset(dst, 0, bytes));
  ZB_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::ok();
#else
  return Status::error("device memory needs a CUDA build");
#endif
}

bool cuda_built() {
#ifdef ZB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int visible_gpu_count() {
#ifdef ZB_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver: the error is sticky otherwise
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

Status select_gpu(int local_rank) {
#ifdef ZB_HAVE_CUDA
  int n = visible_gpu_count();
  if (local_rank >= n)
    return Status::error("node-local rank " + std::to_string(local_rank) + " has no GPU (" +
                         std::to_string(n) + " visible): launch one rank per GPU");
  ZB_CUDA_CHECK(cudaSetDevice(local_rank));
  return Status::ok();
#else
  return Status::error("no CUDA in this build");
#endif
}

std::string gpu_model() {
#ifdef ZB_HAVE_CUDA
  int dev = 0;
  cudaDeviceProp prop;
  if (visible_gpu_count() > 0 && cudaGetDevice(&dev) == cudaSuccess &&
      cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
    return prop.name;
#endif
  return "";
}

std::string cuda_version() {
#ifdef ZB_HAVE_CUDA
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
  auto fmt = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "runtime " + fmt(rt) + (drv ? ", driver " + fmt(drv) : ", no driver");
#else
  return "";
#endif
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" ", colon + 1));
    }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace zb
