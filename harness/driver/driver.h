// Driver: the custom Google Benchmark main every benchmark shares. It keeps ranks in lock
// step (fixed warm-up and iterations, each iteration's time the maximum over ranks),
// reports from rank 0 only, and writes the JSON whole or not at all.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/topology.h"
#include "harness/core/device.h"
#include "harness/core/trace.h"
#include "harness/driver/control.h"
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
  // Each rank's own median, the fastest and the slowest rank's: a rank that is steadily
  // faster than another (its core shared less) drifts ahead of it through a step.
  double fastest_rank_median_s = 0, slowest_rank_median_s = 0;
  // The side samples the iterations reported (Run::sample), each reduced as the times are:
  // the worst rank's value of each timed iteration, then their median.
  std::map<std::string, double> sides;
  // One of them by name; NaN when no iteration reported it.
  double side(const std::string& name) const;
};

// Which rank's value of a side sample is the worst: the largest for a time, the smallest for
// a rate (the slowest rank's bandwidth).
enum class Worst { max, min };

class Driver;

// The reference collective (Driver::set_reference_collective): the library's own in-place
// all-reduce of this many bytes of fp32 over every rank, timed this many times before each
// repetition and as many after it.
constexpr size_t kReferenceBytes = size_t(1) << 20;
constexpr int kReferenceCalls = 3;
// With --host-tries above 1, before the run's first repetition: how long the reference is
// timed to find the fastest the host runs (the longest slow spell timed on the 2-core guest of
// docs/measurements.md lasted 14 s); how long a try then waits for the host to come back to
// that speed before it runs anyway, at the speed the host has kept to meanwhile; and the pause
// between two sets of the reference meanwhile.
constexpr double kHostCalibrationSeconds = 15;
constexpr double kHostWaitSeconds = 60;
constexpr double kHostPollSeconds = 0.05;

// Handed to a benchmark body: the timing loops, which live only here, and the counters.
// Every loop runs the driver's warm-up iterations untimed, then its fixed timed iterations;
// ranks reduce their times on the driver's control plane once, after the loop, so no
// reduction of ours lands inside what is measured. Socket writes are counted only inside
// the timed iterations. None of them reports to Google Benchmark; report() does.
class Run {
 public:
  Run(Driver& driver, benchmark::State& state) : driver_(driver), state_(state) {}
  // Each iteration timed on its own; `iteration` must issue and complete its work.
  Status per_iteration(const std::function<Status()>& iteration, Timing* out);
  // Called by an iteration of per_iteration or interleaved: something besides its time that
  // this iteration measured (compute's wait for communication, a copy's bandwidth). The driver
  // reduces it exactly as it reduces the time, once, after the loop: warm-up iterations are
  // left out, each iteration's worst rank taken, then the median (Timing::side). Outside a
  // timed iteration (warm-up, a batch) it is ignored.
  void sample(const std::string& name, double value, Worst worst = Worst::max);
  // As nccl-tests and IMB time a collective: `issue` the iterations back to back, then
  // `complete` once; the total over the iteration count, the maximum over ranks.
  Status batch(const std::function<Status()>& issue, const std::function<Status()>& complete,
               Timing* out);
  // Several variants timed in rounds (each round runs every variant once), so that a slow
  // spell of a shared machine lands on all of them alike and their differences stay honest.
  // `before` and `after` run untimed around each timed `body` (e.g. a step to reach the
  // steady state, then draining what it left in flight). Every rank starts each variant
  // together (a barrier before its `before`).
  struct Variant {
    std::function<Status()> before, body, after;
  };
  Status interleaved(const std::vector<Variant>& variants, std::vector<Timing>* out);
  // Google Benchmark's time for this benchmark: `t`'s per-iteration times, or its mean,
  // handed over by finish() once the repetition is final (a later try's report replaces it).
  void report(const Timing& t);
  void finish();
  void counter(const std::string& name, double value);
  benchmark::State& state() { return state_; }
  Driver& driver() { return driver_; }

 private:
  struct Samples;
  // Scoped to the timed iterations of a loop: where sample() puts its values.
  class Recording;
  Driver& driver_;
  benchmark::State& state_;
  Samples* recording_ = nullptr;
  Timing reported_;
  bool has_report_ = false;
};

class Driver {
 public:
  Driver(std::string program, std::string summary);
  ~Driver();

  Flags& flags() { return flags_; }
  // Per-program defaults, set before parse() so --help shows them.
  void set_default_iterations(int64_t iters, int64_t warmup);
  // For a program that models ranks rather than running them (zb_predict): --ranks-per-node
  // describes the modelled ranks and is read back with ranks_per_node(), not applied here.
  void model_nodes_only() { model_nodes_only_ = true; }
  int64_t ranks_per_node() const { return ranks_per_node_; }
  // For a program whose mpi-backend collectives run on the communication thread beside the
  // rank's own (the overlapping steps, a --progress=thread sweep), set before start(): where
  // the two threads share a core, Open MPI is asked to yield (prefer_mpi_yield). Collectives
  // on the calling thread alone keep the library's polling, which a small one's latency needs.
  void set_thread_progress(bool on) { thread_progress_ = on; }
  // For a program whose results are held against another run's (the sweep and the steps the
  // predictor compares), called before parse(): around each benchmark's repetition every rank
  // times the reference collective (time_reference, timing.cc), and the counter reference_s is
  // its median, the slowest rank's: how fast this host ran one fixed collective meanwhile.
  // Adds --host-tries, which runs a repetition again while that reference says the host
  // changed speed under it (counter host_tries).
  void use_reference_collective();
  // Two steps, so that a bad flag ends the program before MPI starts. parse(): the flags and
  // the launcher's variables, checked; -1 to go on, or an exit code to end with now: 0 after
  // --help, --show-backend or --show-launch, 2 after a bad flag or variable. The program then
  // checks its own flags (those that need no rank count), ending with bad_flag() on the first
  // that fails, and calls start(): MPI or the environment's rendezvous, the nodes, the control
  // plane and the measured communicator; -1 to go on, or 2 when a flag does not fit the rank
  // count (or the ranks' variables contradict each other), 1 after a failure.
  int parse(int argc, char** argv);
  int start();
  // One line saying what is wrong, from the process that prints; returns exit code 2.
  int bad_flag(const Status& why);
  // Whether this process prints: rank 0 once the ranks have met. Before, the launch the
  // environment describes says (launch.h); a process no launcher started prints.
  bool prints() const;
  // How this process was launched (known once parse() has run).
  const Launch& launch() const { return launch_; }

  // The backend --backend resolved to (known once parse() has run).
  Backend backend() const { return backend_; }
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

  // The driver's own traffic (reductions and gathers of results), never on the measured
  // communicator; every wait in it is bounded by --timeout and fails with one line naming
  // the wait and the ranks missing. The calls below end the job with that line; a body that
  // returns the error ends it the same way.
  ControlPlane& control() { return *control_; }
  double max_over_ranks(double v);
  // Element by element, in place: one reduction for a whole loop's values.
  Status max_over_ranks(std::vector<double>* values);
  double sum_over_ranks(double v);
  // Each node's ranks' values summed, then the largest of those sums: the busiest node.
  double max_over_nodes(double v);
  // Every rank's spans, gathered to rank 0 and written there as one Chrome trace (see
  // chrome_trace_events for the arguments).
  Status write_trace(const std::string& path, const std::vector<TraceSpan>& spans, double origin_s,
                     const std::string& metadata, const std::string& rank_args = "");
  // A check failed (wrong elements, ...): the run continues, the exit code becomes 1.
  void mark_failed(const std::string& why);
  // A collective or device call failed: one line, then the whole job ends (the other
  // ranks would otherwise hang in their next collective).
  [[noreturn]] void abort_job(const Status& status);

 private:
  // The flag checks that need no rank count, after the flags are parsed.
  Status check_flags();
  // start()'s first half (start.cc): MPI or the environment's rendezvous, the topology, the
  // control plane and the measured communicator; -1 to go on, else the exit code.
  int connect();
  // The reference collective, `calls` times after an untimed one; each time appended to `times`.
  Status time_reference(int calls, std::vector<double>* times);
  // One repetition of a benchmark with the reference collective around it. With --host-tries
  // above 1, first (once a run) the reference timed for kHostCalibrationSeconds to find the
  // host's fastest speed (fastest_host_speed over every set timed); then before each try a
  // wait, up to kHostWaitSeconds, until the reference runs at it (where it does not, the
  // speeds of that wait become the ones kept to); and the repetition run again, up to
  // --host-tries times in all, while its reference before and after says the host moved
  // (repetition_at_fastest_speed). `reference_s`: the last try's, the slowest rank's median of
  // its reference times.
  Status run_at_host_speed(const std::function<Status()>& repetition, double* reference_s, int* tries);
  // One set of the reference into `times` (cleared first): `slowest_s` the slowest rank's
  // median of it, and `late` whether any rank's clock has passed `deadline`.
  Status reference_set(std::vector<double>* times, double deadline, double* slowest_s, bool* late);

  Flags flags_;
  std::string backend_flag_ = "auto", json_path_, fault_skip_, fault_slow_, fault_stall_;
  double timeout_s_ = 300;
  int64_t iters_ = 20, warmup_ = 5, fault_corrupt_ = -1, ranks_per_node_ = 0;
  int64_t host_tries_ = 1, fault_slow_reference_ = 0;
  std::vector<double> reference_sets_;  // each set's slowest median the run has timed, with --host-tries
  bool model_nodes_only_ = false, show_backend_ = false, show_launch_ = false;
  Launch launch_;
  std::string launch_error_;  // why the launcher's variables could not be read
  Backend backend_ = Backend::mpi;
  FaultPlan faults_;
  std::string fault_slow_stage_, fault_late_;
  int stall_rank_ = -1;
  Wait stall_kind_ = Wait::barrier;
  std::vector<std::string> passthrough_;
  std::vector<char*> gb_argv_;
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<Communicator> comm_;
  Topology topo_;
  bool failed_ = false, mpi_started_ = false, thread_progress_ = false, reference_ = false;
  Buffer reference_buffer_;
  std::string mpi_yield_why_;  // why Open MPI's collectives yield their cores or not (prefer_mpi_yield)
  std::string command_line_;
};

}  // namespace zb
