// Driver: flags before anything starts, start-up, rank-0 reporting and the JSON file.
#include "harness/driver/driver.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include <mpi.h>

#include "harness/comm/mpi_ops.h"
#include "harness/core/files.h"
#include "harness/driver/reporters.h"
#include "harness/driver/table.h"
#include "harness/predict/sweep.h"
#include "harness/stage/stage_json.h"
#include "harness/stage/stage.h"
#include <zb_revision.h>  // generated at build time (cmake/revision.cmake): ZB_GIT_REVISION

namespace zb {
Driver::Driver(std::string program, std::string summary)
    : flags_(std::move(program), std::move(summary)) {
  flags_.add_choice("backend", &backend_flag_,
                    "communication backend; auto picks nccl when a GPU is visible, else mpi under "
                    "an MPI launcher (or none) and gloo when started from the environment",
                    {"auto", "mpi", "nccl", "gloo"});
  flags_.add_bool("show-backend", &show_backend_,
                  "print the backend --backend resolves to on this machine and build (one "
                  "word), then exit");
  flags_.add_bool("show-launch", &show_launch_,
                  "print how this process was launched, as three words (mpi, torchrun, slurm or "
                  "none; its rank; the rank count, 0 where MPI finds it), then exit");
  flags_.add_string("json", &json_path_, "write Google Benchmark JSON here (rank 0)");
  flags_.add_double("timeout", &timeout_s_,
                    "seconds a collective, or any wait of the driver's, may take before the job "
                    "is aborted",
                    0.001, 1e6);
  flags_.add_int("iters", &iters_, "timed iterations per benchmark", 1, 1000000);
  flags_.add_int("warmup", &warmup_, "untimed warm-up iterations per benchmark", 0, 1000000);
  flags_.add_string("fault-skip", &fault_skip_,
                    "test only: RANK:CALL makes RANK silently skip its CALL-th collective");
  flags_.add_int("fault-corrupt", &fault_corrupt_,
                 "test only: this rank corrupts one element of its input", -1, 1 << 30);
  flags_.add_int("ranks-per-node", &ranks_per_node_,
                 "declare nodes of this many consecutive ranks (default 0: the ranks that share "
                 "memory form a node), to run node-aware stages on one machine", 0, 1 << 30);
  flags_.add_string("fault-slow", &fault_slow_,
                    "test only: OP:FRACTION makes every OP collective FRACTION longer (mpi backend)");
  flags_.add_string("fault-slow-stage", &fault_slow_stage_,
                    "test only: STAGE:FRACTION makes every full step of STAGE FRACTION longer "
                    "(zb_zero)");
  flags_.add_string("fault-late", &fault_late_,
                    "test only: RANK:MS makes RANK sleep MS milliseconds at the end of every full step, a "
                    "straggler the next step meets (zb_zero)");
  flags_.add_string("fault-stall", &fault_stall_,
                    "test only: RANK:WAIT makes RANK stop itself (SIGSTOP) at its first wait of "
                    "the driver's of kind WAIT: barrier, reduction, fence, trace or final");
}

Driver::~Driver() {
  comm_.reset();
  control_.reset();
  int finalized = 0;
  if (mpi_started_) MPI_Finalized(&finalized);
  if (mpi_started_ && !finalized) MPI_Finalize();
}

bool Driver::prints() const {
  if (control_) return control_->rank() == 0;
  // Before start-up the launcher's variables say (launch.h); where they could not be read, the
  // first rank variable set does, and a process no launcher started prints.
  if (launch_error_.empty()) return launch_.rank == 0;
  return launcher_rank([](const char* name) { return std::getenv(name); }) <= 0;
}

int Driver::bad_flag(const Status& why) {
  if (prints()) std::fprintf(stderr, "%s: %s\n", program().c_str(), why.message().c_str());
  return 2;
}

Status Driver::check_flags() {
  if (!fault_skip_.empty()) {
    auto parts = split(fault_skip_, ':');
    int64_t r = -1, c = -1;
    if (parts.size() != 2 || !parse_int(parts[0], &r) || !parse_int(parts[1], &c) || r < 0 || c < 0)
      return Status::error("--fault-skip takes RANK:CALL, two integers >= 0, not '" + fault_skip_ +
                           "'");
    faults_.skip_rank = int(r);
    faults_.skip_call = c;
  }
  faults_.corrupt_rank = int(fault_corrupt_);
  if (!fault_slow_.empty()) {
    auto parts = split(fault_slow_, ':');
    Coll op = Coll::all_reduce;
    double frac = 0;
    if (parts.size() != 2 || !parse_coll(parts[0], &op) || !parse_double(parts[1], &frac) ||
        frac <= 0 || frac > 100)
      return Status::error("--fault-slow takes OP:FRACTION, OP one of all_reduce, reduce_scatter, "
                           "all_gather and FRACTION in (0, 100], not '" + fault_slow_ + "'");
    faults_.slow_op = int(op);
    faults_.slow_fraction = frac;
  }
  if (!fault_slow_stage_.empty()) {
    auto parts = split(fault_slow_stage_, ':');
    Stage stage = Stage::dp;
    double frac = 0;
    if (parts.size() != 2 || !parse_stage(parts[0], &stage) || !parse_double(parts[1], &frac) ||
        frac <= 0 || frac > 100)
      return Status::error("--fault-slow-stage takes STAGE:FRACTION, STAGE one of " +
                           join(stage_names(), ", ") + " and FRACTION in (0, 100], not '" +
                           fault_slow_stage_ + "'");
    faults_.slow_stage = int(stage);
    faults_.slow_stage_fraction = frac;
  }
  if (!fault_late_.empty()) {
    auto parts = split(fault_late_, ':');
    int64_t r = -1;
    double ms = 0;
    if (parts.size() != 2 || !parse_int(parts[0], &r) || r < 0 || !parse_double(parts[1], &ms) || ms <= 0 ||
        ms > 1e5)
      return Status::error("--fault-late takes RANK:MS, RANK >= 0 and MS in (0, 100000], not '" + fault_late_ +
                           "'");
    faults_.late_rank = int(r);
    faults_.late_s = ms * 1e-3;
  }
  if (!fault_stall_.empty()) {
    auto parts = split(fault_stall_, ':');
    int64_t r = -1;
    bool known = false;
    for (const auto& [name, kind] : wait_choices())
      if (parts.size() == 2 && parts[1] == name) known = true, stall_kind_ = kind;
    if (parts.size() != 2 || !parse_int(parts[0], &r) || r < 0 || !known)
      return Status::error("--fault-stall takes RANK:WAIT, RANK >= 0 and WAIT one of barrier, "
                           "reduction, fence, trace, final, not '" + fault_stall_ + "'");
    stall_rank_ = int(r);
  }
  if (!json_path_.empty()) ZB_RETURN_IF_ERROR(check_output_path("--json", json_path_));
  if (!launch_error_.empty()) return Status::error(launch_error_);
  ZB_RETURN_IF_ERROR(resolve_backend(backend_flag_, !launch_.environment(), launch_.source, &backend_));
  if (backend_ == Backend::nccl && faults_.slow_op >= 0)
    return Status::error("--fault-slow is a test-only fault of the mpi backend; use --backend=mpi");
  return Status::ok();
}

int Driver::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) command_line_ += (i ? " " : "") + std::string(argv[i]);
  Status launch = detect_launch([](const char* name) { return std::getenv(name); }, &launch_);
  if (!launch) launch_error_ = launch.message();
  bool help = false;
  Status s = flags_.parse(argc, argv, &passthrough_, &help);
  if (help) {
    if (prints()) std::cout << flags_.usage();
    return 0;
  }
  if (s) s = check_flags();
  if (!s) return bad_flag(s);
  if (show_backend_) {
    if (prints()) std::printf("%s\n", backend_name(backend_));
    return 0;
  }
  if (show_launch_) {
    if (prints())
      std::printf("%s %d %d\n", launch_name(launch_.kind), launch_.rank,
                  launch_.kind == LaunchKind::mpi ? 0 : launch_.size);
    return 0;
  }
  // Google Benchmark sees only its own flags; only the process that prints may write its
  // output file. What it leaves in place it did not know.
  gb_argv_ = {argv[0]};
  for (auto& a : passthrough_)
    if (prints() || a.rfind("--benchmark_out", 0) != 0) gb_argv_.push_back(a.data());
  int gb_argc = int(gb_argv_.size());
  benchmark::Initialize(&gb_argc, gb_argv_.data());
  if (gb_argc > 1)
    return bad_flag(Status::error("unknown flag " + std::string(gb_argv_[1]) + " (see --help)"));
  return -1;
}

int Driver::start() {
  // The ranks (through MPI or from the environment), their nodes, the control plane and the
  // measured communicator: start.cc.
  const int code = connect();
  if (code >= 0) return code;
  comm_->set_faults(faults_);
  comm_->set_timeout_handler([this](const Status& why) { abort_job(why); });
  // Every rank has made its communicators before any benchmark begins.
  Status s = control_->barrier(Wait::barrier, "start-up");
  if (!s) abort_job(s);

  context("world_size", std::to_string(topo_.size));
  context("nodes", std::to_string(topo_.nodes));
  context("ranks_per_node", topo_.uniform() ? std::to_string(topo_.local_size) : "unequal");
  context("nodes_from", topo_.declared ? "--ranks-per-node" : mpi_started_ ? "shared memory" : "host names");
  context("launch", launch_name(launch_.kind));
  context("backend", backend_name(backend_));
  context("library", comm_->library_version());
  context("mpi_library", mpi_library_version());
  context("host", host_name());
  context("cpu_model", cpu_model());
  if (backend_ == Backend::nccl) {
    context("gpu_model", gpu_model());
    context("cuda", cuda_version());
  }
  context("git_revision", ZB_GIT_REVISION);
  context("command_line", command_line_);
  context("iterations", std::to_string(iters_));
  context("warmup", std::to_string(warmup_));
  context("collective_algorithms", algorithm_settings());
  if (!mpi_yield_why_.empty()) context("mpi_yield_when_idle", mpi_yield_in_force() + " (" + mpi_yield_why_ + ")");
  return -1;
}

void Driver::set_default_iterations(int64_t iters, int64_t warmup) {
  iters_ = iters;
  warmup_ = warmup;
  flags_.set_default_text("iters", std::to_string(iters));
  flags_.set_default_text("warmup", std::to_string(warmup));
}

int Driver::cpu_threads_per_rank() const {
  unsigned hw = std::thread::hardware_concurrency();
  return std::max(1, int(hw ? hw : 1) / std::max(1, topo_.device_ranks));
}

namespace {

// `json` (Google Benchmark's, which opens with its context) with `key`: `value` first in the
// context: for a long value the console's copy of the context is better without.
std::string with_context(const std::string& json, const std::string& key,
                         const std::string& value) {
  const std::string open = "\"context\": {";
  const size_t at = json.find(open);
  if (at == std::string::npos) return json;
  std::string escaped;
  for (char c : value) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return json.substr(0, at + open.size()) + "\n    \"" + key + "\": \"" + escaped + "\"," +
         json.substr(at + open.size());
}

}  // namespace

void Driver::context(const std::string& key, const std::string& value) {
  benchmark::AddCustomContext(key, value);
}

void Driver::add(const std::string& name, std::function<Status(Run&)> body) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [this, body](benchmark::State& state) {
                                 Run run(*this, state);
                                 double reference_s = NAN;
                                 int tries = 1;
                                 auto once = [&] { return body(run); };
                                 Status s = reference_ ? run_at_host_speed(once, &reference_s, &tries) : once();
                                 if (!s) abort_job(s);
                                 run.finish();
                                 if (reference_) run.counter("reference_s", reference_s);
                                 if (host_tries_ > 1) run.counter("host_tries", tries);
                               })
      ->Iterations(iters_)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

void Driver::use_reference_collective() {
  reference_ = true;
  flags_.add_int("host-tries", &host_tries_,
                 "run each repetition up to this many times in all, until the reference collective "
                 "(reference_s) before and after it agree within " + fmt(kHostChangedRatio, 1) +
                     "x and with the fastest the run has timed, for a virtual machine whose cores move under "
                     "it: the run first times the reference for " + fmt(kHostCalibrationSeconds, 0) +
                     " s to find that speed, and each try waits up to " + fmt(kHostWaitSeconds, 0) +
                     " s for it, then keeps to the speed the host ran at meanwhile (counter host_tries); 1: "
                     "once, no waiting",
                 1, 100);
  flags_.add_int("fault-slow-reference", &fault_slow_reference_,
                 "test only: the reference collective timed after each of the first N tries of a "
                 "repetition reads ten times as long", 0, 1 << 30);
}

Status Driver::max_over_ranks(std::vector<double>* values) {
  return control_->max(values, Wait::reduction,
                       "maximum over ranks of " + std::to_string(values->size()) + " value(s)");
}

double Driver::max_over_ranks(double v) {
  std::vector<double> one{v};
  Status s = control_->max(&one, Wait::reduction, "maximum over ranks");
  if (!s) abort_job(s);
  return one[0];
}

double Driver::sum_over_ranks(double v) {
  std::vector<double> one{v};
  Status s = control_->sum(&one, Wait::reduction, "sum over ranks");
  if (!s) abort_job(s);
  return one[0];
}

double Driver::max_over_nodes(double v) {
  std::vector<double> all;
  Status s =
      control_->all_gather(v, &all, Wait::reduction, "every rank's value, for the busiest node");
  if (!s) abort_job(s);
  std::vector<double> per_node(size_t(topo_.nodes), 0.0);
  for (size_t r = 0; r < all.size(); ++r) per_node[size_t(topo_.node_of[r])] += all[r];
  return *std::max_element(per_node.begin(), per_node.end());
}

Status Driver::write_trace(const std::string& path, const std::vector<TraceSpan>& spans,
                           double origin_s, const std::string& metadata,
                           const std::string& rank_args) {
  std::vector<std::string> events;
  ZB_RETURN_IF_ERROR(control_->gather(chrome_trace_events(spans, origin_s, rank(), rank_args),
                                      &events, Wait::trace, "every rank's spans for " + path));
  return root() ? write_chrome_trace(path, events, metadata) : Status::ok();
}

void Driver::mark_failed(const std::string& why) {
  if (!failed_ && root()) std::fprintf(stderr, "%s: check failed: %s\n", program().c_str(), why.c_str());
  failed_ = true;
}

void Driver::abort_job(const Status& status) {
  // Where rank 0 ended the job (and said why), the others leave without a line of their own.
  if (!(control_ && control_->ended_by_rank_0())) {
    std::fprintf(stderr, "%s: error: %s\n", program().c_str(), status.message().c_str());
    std::fflush(stderr);
  }
  if (control_) control_->abort();  // without MPI, the control plane tells the other ranks
  if (mpi_started_) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

int Driver::run() {
  NullReporter quiet;
  bool color = isatty(fileno(stdout));
  for (const auto& a : passthrough_) color = color && a != "--benchmark_color=false";
  benchmark::ConsoleReporter console(color ? benchmark::ConsoleReporter::OO_ColorTabular
                                           : benchmark::ConsoleReporter::OO_Tabular);
  std::ostringstream json;
  benchmark::JSONReporter json_reporter;
  json_reporter.SetOutputStream(&json);
  json_reporter.SetErrorStream(&std::cerr);
  TeeReporter tee(&console, json_path_.empty() ? nullptr : &json_reporter);
  benchmark::RunSpecifiedBenchmarks(root() ? static_cast<benchmark::BenchmarkReporter*>(&tee)
                                           : &quiet);
  benchmark::Shutdown();
  int failed = failed_ ? 1 : 0;
  if (root() && !json_path_.empty()) {
    // What each stage shards and moves, so that readers of the results never restate the table.
    Status s = write_file_atomically(
        json_path_, with_context(json.str(), "stage_table", stage_table_json()));
    if (!s) {
      std::fprintf(stderr, "%s: %s\n", program().c_str(), s.message().c_str());
      failed = 1;  // still joins the reduction below, which the other ranks wait in
    }
  }
  std::vector<double> any{double(failed)};
  Status s = control_->max(&any, Wait::final, "whether any rank failed");
  if (!s) abort_job(s);
  return any[0] > 0 ? 1 : 0;
}

}  // namespace zb
