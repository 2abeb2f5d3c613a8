// MPI datatypes and reduction ops for zerobench's dtypes, BF16 sum included.
#pragma once

#include <mpi.h>

#include <string>

#include "harness/core/dtype.h"
#include "harness/core/status.h"

namespace zb {

// Creates the BF16 sum op once per process (after MPI_Init).
Status init_mpi_ops();
MPI_Datatype mpi_datatype(DType dtype);
MPI_Op mpi_sum_op(DType dtype);
// The BF16 sum as MPI calls it: inout[i] = bf16(float(in[i]) + float(inout[i])), rounded
// to nearest even once per reduction step. Exposed for the unit tests.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* type);
std::string mpi_library_version();
// Open MPI's collectives poll for their peers without giving up the core unless its job has
// more ranks than slots (mpi_yield_when_idle). Where the collectives run on a communication
// thread beside the rank's own (`thread_progress`) and the two share a core (no two cores a
// rank, rank_has_two_cores), a poll that never yields holds the core from the rank's compute,
// or from a peer's communication thread that the collective itself needs, for a whole time
// slice. There, before MPI starts and unless the launch set it, this asks for the yield.
// Elsewhere the library's polling stays: a yield is a system call at every empty poll, and a
// small collective's latency pays for it. `ranks_on_machine`: the launcher's count (< 1: not
// known, nothing set). Returns what the results' context says.
std::string prefer_mpi_yield(int ranks_on_machine, bool thread_progress);
// Open MPI's mpi_yield_when_idle as MPI reports it (its tool interface), after MPI started;
// "not reported" where the library has no such variable.
std::string mpi_yield_in_force();
// The collective-algorithm settings in force (OMPI_MCA_* and NCCL_* variables), for the
// results' context: a measured/ideal ratio means little without them.
std::string algorithm_settings();

}  // namespace zb
