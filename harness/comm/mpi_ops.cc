// MPI datatypes and reduction ops, with the user-defined BF16 sum.
#include "harness/comm/mpi_ops.h"

#include <cstdlib>
#include <cstring>

#include "harness/comm/cpu_stream.h"
#include "harness/core/bf16.h"

extern char** environ;

namespace zb {
namespace {
MPI_Op g_bf16_sum = MPI_OP_NULL;
constexpr const char* kYieldVariable = "OMPI_MCA_mpi_yield_when_idle";
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

std::string prefer_mpi_yield(int ranks_on_machine, bool thread_progress) {
  if (const char* v = std::getenv(kYieldVariable)) return std::string("the launch's ") + kYieldVariable + "=" + v;
  if (!thread_progress) return "library default: the collectives run on the calling thread";
  if (ranks_on_machine < 1) return "library default: the ranks on this host were not known before MPI started";
  if (this_rank_has_two_cores(ranks_on_machine)) return "library default: two cores a rank";
  setenv(kYieldVariable, "1", 0);
  return "asked for: a rank's compute and communication threads share its cores";
}

std::string mpi_yield_in_force() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return "not reported";
  std::string out = "not reported";
  char name[256], desc[256];
  int index = -1, count = 0, name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind,
                          &scope) == MPI_SUCCESS &&
      (type == MPI_C_BOOL || type == MPI_INT) &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    unsigned char value[16] = {0};  // room for one value of either type
    if (count == 1 && MPI_T_cvar_read(handle, value) == MPI_SUCCESS) {
      bool on = false;
      if (type == MPI_C_BOOL) {
        std::memcpy(&on, value, sizeof on);
      } else {
        int v = 0;
        std::memcpy(&v, value, sizeof v);
        on = v != 0;
      }
      out = on ? "on" : "off";
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return out;
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
