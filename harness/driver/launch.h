// Launch: how this process was started (an MPI launcher, torchrun or a Kubernetes job, a Slurm
// step without PMI, or nothing), its rank among how many, and where the ranks meet, read from
// the launcher's environment before anything starts.
#pragma once

#include <functional>
#include <string>

#include "harness/core/status.h"

namespace zb {

enum class LaunchKind {
  none,      // no launcher: one process (an MPI singleton for the mpi backend)
  mpi,       // mpirun, or srun with a PMI plugin: MPI finds the ranks
  torchrun,  // RANK, WORLD_SIZE, ... as torchrun and Kubernetes jobs set them
  slurm,     // a Slurm step that no PMI plugin started: SLURM_PROCID, SLURM_NTASKS, ...
};
const char* launch_name(LaunchKind kind);

struct Launch {
  LaunchKind kind = LaunchKind::none;
  int rank = 0, size = 1;
  // The launcher's local rank (-1 when it gave none: the rank's place among the ranks of its
  // host then), which picks the GPU, and how many ranks it started on this host (-1: none;
  // an MPI launcher's too, where it says).
  int local_rank = -1, local_size = -1;
  // Where rank 0 listens and the others connect (environment launches of several ranks).
  std::string host;
  int port = 0;
  // Tells apart consecutive jobs that meet at one address: torchrun's run id and
  // ZB_RENDEZVOUS_ID (run_all.sh sets it to each benchmark's name), joined.
  std::string id;
  // Which variables said so, for messages: "RANK, WORLD_SIZE (torchrun or Kubernetes)".
  std::string source;

  // Started from the environment: no MPI at run time.
  bool environment() const { return kind == LaunchKind::torchrun || kind == LaunchKind::slurm; }
  // "127.0.0.1:29500"
  std::string address() const;
};

// Reads the launcher's variables through `env` (getenv, or a table in the tests). An MPI
// launcher's variables win, then torchrun's (RANK or WORLD_SIZE set), then a Slurm step's
// (SLURM_PROCID and SLURM_STEP_ID set, no PMI). A missing, malformed or contradictory variable
// is an error of one line naming it.
using EnvLookup = std::function<const char*(const char* name)>;
Status detect_launch(const EnvLookup& env, Launch* out);

// The rank the first of the launchers' rank variables that is set names (OMPI_COMM_WORLD_RANK,
// PMIX_RANK, PMI_RANK, RANK, SLURM_PROCID); -1 when none is: who prints when detect_launch failed.
int launcher_rank(const EnvLookup& env);

// The first host of a Slurm host list: "node[07-09,12],gpu3" -> "node07".
std::string first_slurm_host(const std::string& list);

// The port a Slurm step's rank 0 listens on when MASTER_PORT is not given: from the job and
// step ids, so every task of a step finds the same one and consecutive steps differ.
int slurm_port(int64_t job_id, int64_t step_id);

}  // namespace zb
