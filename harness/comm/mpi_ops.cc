// MPI datatypes and reduction ops, with the user-defined BF16 sum.
#include "harness/comm/mpi_ops.h"

#include <cstring>

#include "harness/core/bf16.h"

extern char** environ;

namespace zb {
namespace {
MPI_Op g_bf16_sum = MPI_OP_NULL;
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const Bf16* a = static_cast<const Bf16*>(in);
  Bf16* b = static_cast<Bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = bf16_add(a[i], b[i]);
}

Status init_mpi_ops() {
  if (g_bf16_sum != MPI_OP_NULL) return Status::ok();
  ZB_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &g_bf16_sum));
  return Status::ok();
}

MPI_Datatype mpi_datatype(DType dtype) { return dtype == DType::bf16 ? MPI_UINT16_T : MPI_FLOAT; }

MPI_Op mpi_sum_op(DType dtype) { return dtype == DType::bf16 ? g_bf16_sum : MPI_SUM; }

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, size_t(len));
  size_t cut = v.find_first_of(",\n");
  return cut == std::string::npos ? v : v.substr(0, cut);
}

std::string algorithm_settings() {
  std::string out;
  for (char** e = environ; *e; ++e)
  {
    // Only what selects transports and algorithms; mpirun's own bookkeeping is noise.
    std::string v = *e;
    bool ompi = v.rfind("OMPI_MCA_", 0) == 0 &&
                (v.find("coll") != std::string::npos || v.find("btl") != std::string::npos ||
                 v.find("pml") != std::string::npos || v.find("mtl") != std::string::npos);
    if (ompi || v.rfind("NCCL_", 0) == 0) out += (out.empty() ? "" : " ") + v;
  }
  return out.empty() ? "library defaults" : out;
}

}  // namespace zb
