// Driver start-up: the ranks meet through MPI (an MPI launcher, or a lone process of the mpi
// backend) or at the environment's rendezvous address (torchrun, Kubernetes, Slurm without
// PMI), then the nodes, the control plane and the measured communicator.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>

#include "harness/comm/mpi_ops.h"
#include "harness/driver/driver.h"

namespace zb {
namespace {

// Every rank's host name and launcher local rank, on the control plane: the nodes of a launch
// without MPI are the ranks of one host.
Status topology_over(ControlPlane& control, const Launch& launch, Topology* out, bool* contradiction) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::vector<std::string> all;
  ZB_RETURN_IF_ERROR(control.exchange(std::to_string(launch.local_rank) + ' ' + host, &all,
                                      Wait::barrier, "every rank's host, for the nodes"));
  std::vector<std::string> hosts;
  std::vector<int> local_ranks;
  for (const std::string& a : all) {
    const size_t space = a.find(' ');
    local_ranks.push_back(std::atoi(a.substr(0, space).c_str()));
    hosts.push_back(a.substr(space + 1));
  }
  Status s = topology_from_hosts(control.rank(), hosts, local_ranks, out);
  *contradiction = !s;
  return s;
}

}  // namespace

int Driver::connect() {
  Status s;
  // MPI runs only where MPI launched the ranks, or for a lone process of the mpi backend (MPI's
  // singleton); a launch from the environment needs no MPI at run time.
  if (launch_.kind == LaunchKind::mpi || (launch_.kind == LaunchKind::none && backend_ == Backend::mpi)) {
    const int ranks_here = launch_.kind == LaunchKind::none ? 1 : launch_.local_size;
    if (backend_ == Backend::mpi) mpi_yield_why_ = prefer_mpi_yield(ranks_here, thread_progress_);
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    mpi_started_ = true;
    s = make_topology(MPI_COMM_WORLD, &topo_);
    if (!s) abort_job(s.context("finding the ranks' nodes"));
    s = make_mpi_control_plane(timeout_s_, &control_);
    if (!s) abort_job(s.context("creating the driver's control plane"));
  } else {
    bool contradiction = false;
    s = make_tcp_control_plane(launch_, timeout_s_, &control_, &contradiction);
    if (!s && contradiction) {
      // The ranks' own variables disagree: bad input, said by rank 0 and the rank it refused.
      std::fprintf(stderr, "%s: %s\n", program().c_str(), s.message().c_str());
      return 2;
    }
    if (!s) abort_job(s);
    s = topology_over(*control_, launch_, &topo_, &contradiction);
    if (!s && contradiction) return bad_flag(s);  // every rank found it; rank 0 says it
    if (!s) abort_job(s);
  }
  if (ranks_per_node_ > 0 && !model_nodes_only_) s = declare_nodes(int(ranks_per_node_), &topo_);
  if (!s) return bad_flag(s);
  control_->set_stall(stall_rank_, stall_kind_);

  ControlPlane* control = control_.get();
  Bootstrap boot;
  boot.exchange = [control](const std::string& mine, std::vector<std::string>* all, const std::string& what) {
    return control->exchange(mine, all, Wait::barrier, what);
  };
  boot.barrier = [control](const std::string& what) { return control->barrier(Wait::barrier, what); };
  boot.address = control_->local_address();
  switch (backend_) {
    case Backend::mpi: s = make_mpi_communicator(MPI_COMM_WORLD, topo_, timeout_s_, &comm_); break;
    case Backend::nccl: s = make_nccl_communicator(topo_, timeout_s_, boot, &comm_); break;
    case Backend::gloo: s = make_gloo_communicator(topo_, timeout_s_, boot, &comm_); break;
    case Backend::record: s = Status::error("the record backend runs no ranks"); break;
  }
  if (!s)
    abort_job(s.context("creating the " + std::string(backend_name(backend_)) + " communicator"));
  return -1;
}

}  // namespace zb
