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
// The collective-algorithm settings in force (OMPI_MCA_* and NCCL_* variables), for the
// results' context: a measured/ideal ratio means little without them.
std::string algorithm_settings();

}  // namespace zb
