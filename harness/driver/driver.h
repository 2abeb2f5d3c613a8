// Driver: the custom Google Benchmark main every benchmark shares. It keeps ranks in lock
// step (fixed warm-up and iterations, each iteration's time the maximum over ranks),
// reports from rank 0 only, and writes the JSON whole or not at all.
#pragma once

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/topology.h"
#include "harness/driver/flags.h"

namespace zb {

// What the timed iterations of one benchmark measured. Per-iteration times are the maximum
// over ranks of each iteration (the slowest rank decides a step); a batch has one time, its
// total divided by its iterations.
struct Timing {
  int64_t iterations = 0;
  std::vector<double> times;    // per-iteration maxima over ranks (empty for a batch)
  double mean_s = 0, min_s = 0;
  double median_s = 0;          // robust to the odd slow iteration of a shared machine
  double p99_s = 0;             // nearest rank; for a batch the mean
  double write_bytes = -1;      // this rank's socket write bytes per iteration; -1 unknown
};

class Driver;

// Handed to a benchmark body: the timing loops, which live only here, and the counters.
// Every loop runs the driver's warm-up iterations untimed, then its fixed timed iterations;
// ranks reduce their times over the driver's own communicator once, after the loop, so no
// reduction of ours lands inside what is measured. Socket writes are counted only inside
// the timed iterations. None of them reports to Google Benchmark; report() does.
class Run {
 public:
  Run(Driver& driver, benchmark::State& state) : driver_(driver), state_(state) {}
  // Each iteration timed on its own; `iteration` must issue and complete its work.
  Status per_iteration(const std::function<Status()>& iteration, Timing* out);
  // As nccl-tests and IMB time a collective: `issue` the iterations back to back, then
  // `complete` once; the total over the iteration count, the maximum over ranks.
  Status batch(const std::function<Status()>& issue, const std::function<Status()>& complete,
               Timing* out);
  // Several variants timed in rounds (each round runs every variant once), so that a slow
  // spell of a shared machine lands on all of them alike and their differences stay honest.
  // `before` and `after` run untimed around each timed `body` (e.g. a step to reach the
  // steady state, then draining what it left in flight).
  struct Variant {
    std::function<Status()> before, body, after;
  };
  Status interleaved(const std::vector<Variant>& variants, std::vector<Timing>* out);
  // Google Benchmark's time for this benchmark: `t`'s per-iteration times, or its mean.
  void report(const Timing& t);
  void counter(const std::string& name, double value);
  benchmark::State& state() { return state_; }
  Driver& driver() { return driver_; }

 private:
  Driver& driver_;
  benchmark::State& state_;
};

class Driver {
 public:
  Driver(std::string program, std::string summary);
  ~Driver();

  Flags& flags() { return flags_; }
  // Per-program defaults, set before init() so --help shows them.
  void set_default_iterations(int64_t iters, int64_t warmup);
  // For a program that models ranks rather than running them (zb_predict): --ranks-per-node
  // describes the modelled ranks and is read back with ranks_per_node(), not applied here.
  void model_nodes_only() { model_nodes_only_ = true; }
  int64_t ranks_per_node() const { return ranks_per_node_; }
  // Initialises MPI, parses flags and creates the communicator. Returns -1 to go on, or an
  // exit code to end with now (0 after --help, 2 after a bad flag, 1 after a failure).
  int init(int argc, char** argv);

  Communicator& comm() { return *comm_; }
  const Topology& topology() const { return topo_; }
  int rank() const { return topo_.rank; }
  int size() const { return topo_.size; }
  bool root() const { return topo_.rank == 0; }
  // CPU kernel threads: the node's cores shared among the ranks on the node.
  int cpu_threads_per_rank() const;
  int64_t iterations() const { return iters_; }
  int64_t warmup() const { return warmup_; }
  const FaultPlan& faults() const { return faults_; }
  const std::string& program() const { return flags_.program(); }

  void add(const std::string& name, std::function<Status(Run&)> body);
  void context(const std::string& key, const std::string& value);
  // Runs every registered benchmark, prints, writes --json; returns the exit code.
  int run();

  // The driver's own communicator (a duplicate of the world): reductions and gathers of
  // results go here, never through the measured one.
  MPI_Comm mpi_comm() const { return driver_comm_; }
  // Reductions over the driver's own communicator, never the measured one.
  double max_over_ranks(double v);
  // Element by element, in place: one reduction for a whole loop's values.
  Status max_over_ranks(std::vector<double>* values);
  double sum_over_ranks(double v);
  // Each node's ranks' values summed, then the largest of those sums: the busiest node.
  double max_over_nodes(double v);
  // A check failed (wrong elements, ...): the run continues, the exit code becomes 1.
  void mark_failed(const std::string& why);
  // A collective or device call failed: one line, then the whole job ends (the other
  // ranks would otherwise hang in their next collective).
  [[noreturn]] void abort_job(const Status& status);

 private:
  Flags flags_;
  std::string backend_flag_ = "auto", json_path_, fault_skip_, fault_slow_;
  double timeout_s_ = 300;
  int64_t iters_ = 20, warmup_ = 5, fault_corrupt_ = -1, ranks_per_node_ = 0;
  bool model_nodes_only_ = false;
  FaultPlan faults_;
  std::vector<std::string> passthrough_;
  std::unique_ptr<Communicator> comm_;
  MPI_Comm driver_comm_ = MPI_COMM_NULL;
  Topology topo_;
  bool failed_ = false, mpi_started_ = false;
  std::string command_line_;
};

}  // namespace zb
