// Control plane: the driver's own traffic between ranks (barriers, reductions of what it
// measured, gathering traces), apart from the measured communicator, with every wait bounded
// by one timeout and ended by one line naming the wait and the ranks that had not arrived.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/status.h"
#include "harness/driver/launch.h"

namespace zb {

// The kinds of wait the driver makes; a timeout names its kind, and the test-only stall
// fault picks one.
enum class Wait { barrier, reduction, fence, trace, final };
const char* wait_name(Wait kind);    // the fault's name: "fence"
const char* wait_phrase(Wait kind);  // a timeout's: "node-window fence"
std::vector<std::pair<std::string, Wait>> wait_choices();

// Every operation is one round through rank 0, the hub: each rank hands rank 0 its part,
// rank 0 answers every rank once all parts are in. So rank 0 always knows who is missing,
// and every other rank, waiting for one answer, knows that rank 0 is. A round that outlasts
// the timeout fails with one line, from rank 0 naming the ranks not heard from and from
// the others (a little later, so rank 0 speaks first) naming rank 0.
//
// An implementation provides only the round: MPI's (control_mpi.cc) on a communicator of
// the driver's own, or TCP's (control_tcp.cc) from a rendezvous address, with no MPI at run
// time.
class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  double timeout_s() const { return timeout_s_; }

  // Returns once every rank has arrived.
  Status barrier(Wait kind, const std::string& what);
  // Element by element over ranks, in place; every rank ends with the result. Every rank
  // must pass the same number of values.
  Status max(std::vector<double>* values, Wait kind, const std::string& what);
  Status sum(std::vector<double>* values, Wait kind, const std::string& what);
  // Every rank's value, in rank order, on every rank.
  Status all_gather(double value, std::vector<double>* out, Wait kind, const std::string& what);
  // Every rank's blob on rank 0, in rank order (`out` is left empty elsewhere).
  Status gather(const std::string& blob, std::vector<std::string>* out, Wait kind,
                const std::string& what);
  // Rank 0's blob on every rank.
  Status broadcast(std::string* blob, Wait kind, const std::string& what);
  // Every rank's blob on every rank, in rank order (a backend's addresses, NCCL's unique id).
  Status exchange(const std::string& blob, std::vector<std::string>* all, Wait kind,
                  const std::string& what);

  // The address this rank reaches rank 0 from (for a backend to listen on the same network);
  // "" where the transport does not say (MPI).
  virtual std::string local_address() const { return ""; }
  // The job is ending here: tell the other ranks, where the transport can (rank 0's TCP plane
  // sends each an abort; MPI_Abort ends them anyway).
  virtual void abort() {}
  // Whether rank 0 ended the job (so this rank leaves without a line of its own: rank 0 has
  // printed the reason).
  virtual bool ended_by_rank_0() { return false; }

  // Test only: `rank` stops itself (SIGSTOP) at its first wait of `kind`, as a rank that
  // hangs would, so the tests can see every kind of wait end in a timeout.
  void set_stall(int rank, Wait kind) { stall_rank_ = rank, stall_kind_ = kind; }

 protected:
  explicit ControlPlane(double timeout_s) : timeout_s_(timeout_s) {}

  // Rank 0 makes the answer from every rank's part, in rank order.
  using Answer = std::function<Status(const std::vector<std::string>& parts, std::string* answer)>;
  // One round: `part` to rank 0; on rank 0, `answer` over all parts once they are in; the
  // answer back to every rank in `*answer_out`. `what` names the wait in a timeout.
  virtual Status round(const std::string& part, const Answer& answer, std::string* answer_out,
                       const std::string& what) = 0;

  // How long rank 0 waits for a round, and how long the others do: longer, so that rank 0,
  // which knows who is missing, reports first; rank 1 speaks for the others when rank 0 is
  // the one missing, so one line is printed either way.
  double hub_deadline_s() const { return timeout_s_; }
  double peer_deadline_s() const;
  // The one-line timeout error: "<what> did not complete within T s: ranks 1, 3 had not
  // arrived".
  Status late(const std::string& what, double waited_s, const std::vector<int>& missing) const;

 private:
  Status run(Wait kind, const std::string& what, const std::string& part, const Answer& answer,
             std::string* answer_out);
  Status reduce(std::vector<double>* values, bool take_max, Wait kind, const std::string& what);

  double timeout_s_;
  int stall_rank_ = -1;
  Wait stall_kind_ = Wait::barrier;
  bool stalled_ = false;
};

// The MPI control plane, on a duplicate of `world` of its own (MPI must be running).
Status make_mpi_control_plane(double timeout_s, std::unique_ptr<ControlPlane>* out);
// The TCP control plane of an environment launch: rank 0 listens at the launch's address, the
// others connect, each says who it is; returns once all `launch.size` ranks are there, or
// after the timeout with one line naming how many arrived. `*contradiction` is set when the
// ranks' own variables disagree (two ranks with one RANK, WORLD_SIZE unequal): bad input.
// `*out` is set even after a failure, for ended_by_rank_0().
Status make_tcp_control_plane(const Launch& launch, double timeout_s, std::unique_ptr<ControlPlane>* out,
                              bool* contradiction);

}  // namespace zb
