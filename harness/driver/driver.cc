// Driver: MPI start-up, flags, lock-step timing, rank-0 reporting and the JSON file.
#include "harness/driver/driver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness/comm/mpi_ops.h"
#include "harness/core/files.h"
#include "harness/core/stats.h"
#include "harness/driver/reporters.h"
#include <zb_revision.h>  // generated at build time (cmake/revision.cmake): ZB_GIT_REVISION

namespace zb {

Driver::Driver(std::string program, std::string summary)
    : flags_(std::move(program), std::move(summary)) {
  flags_.add_choice("backend", &backend_flag_,
                    "communication backend; auto picks nccl when a GPU is visible",
                    {"auto", "mpi", "nccl"});
  flags_.add_string("json", &json_path_, "write Google Benchmark JSON here (rank 0)");
  flags_.add_double("timeout", &timeout_s_,
                    "seconds a collective may take before the job is aborted", 0.001, 1e6);
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
}

Driver::~Driver() {
  comm_.reset();
  if (driver_comm_ != MPI_COMM_NULL) MPI_Comm_free(&driver_comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (mpi_started_ && !finalized) MPI_Finalize();
}

int Driver::init(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  mpi_started_ = true;
  Status s = make_topology(MPI_COMM_WORLD, &topo_);
  if (!s) abort_job(s.context("finding the ranks' nodes"));
  for (int i = 0; i < argc; ++i) command_line_ += (i ? " " : "") + std::string(argv[i]);

  bool help = false;
  s = flags_.parse(argc, argv, &passthrough_, &help);
  if (s && !fault_skip_.empty()) {
    auto parts = split(fault_skip_, ':');
    int64_t r = -1, c = -1;
    if (parts.size() != 2 || !parse_int(parts[0], &r) || !parse_int(parts[1], &c) || r < 0 || c < 0)
      s = Status::error("--fault-skip takes RANK:CALL, two integers >= 0, not '" + fault_skip_ + "'");
    faults_.skip_rank = int(r);
    faults_.skip_call = c;
  }
  faults_.corrupt_rank = int(fault_corrupt_);
  if (s && !fault_slow_.empty()) {
    auto parts = split(fault_slow_, ':');
    Coll op = Coll::all_reduce;
    double frac = 0;
    if (parts.size() != 2 || !parse_coll(parts[0], &op) || !parse_double(parts[1], &frac) ||
        frac <= 0 || frac > 100)
      s = Status::error("--fault-slow takes OP:FRACTION, OP one of all_reduce, reduce_scatter, "
                        "all_gather and FRACTION in (0, 100], not '" + fault_slow_ + "'");
    faults_.slow_op = int(op);
    faults_.slow_fraction = frac;
  }
  if (help) {
    if (root()) std::cout << flags_.usage();
    return 0;
  }
  if (s && !json_path_.empty()) s = check_output_path("--json", json_path_);
  if (s && ranks_per_node_ > 0 && !model_nodes_only_) s = declare_nodes(int(ranks_per_node_), &topo_);
  if (!s) {
    if (root()) std::fprintf(stderr, "%s: %s\n", program().c_str(), s.message().c_str());
    return 2;
  }
  Backend backend;
  s = resolve_backend(backend_flag_, &backend);
  if (s && backend == Backend::nccl && faults_.slow_op >= 0)
    s = Status::error("--fault-slow is a test-only fault of the mpi backend; use --backend=mpi");
  if (!s) {
    if (root()) std::fprintf(stderr, "%s: %s\n", program().c_str(), s.message().c_str());
    return 2;
  }
  s = dup_comm(MPI_COMM_WORLD, &driver_comm_);
  if (s) s = backend == Backend::mpi ? make_mpi_communicator(MPI_COMM_WORLD, topo_, timeout_s_, &comm_)
                                     : make_nccl_communicator(MPI_COMM_WORLD, topo_, timeout_s_, &comm_);
  if (!s) abort_job(s.context("creating the " + std::string(backend_name(backend)) + " communicator"));
  comm_->set_faults(faults_);
  comm_->set_timeout_handler([this](const Status& why) { abort_job(why); });

  // Google Benchmark sees only its own flags; only rank 0 may write its output file.
  std::vector<char*> gb_argv{argv[0]};
  for (auto& a : passthrough_)
    if (root() || a.rfind("--benchmark_out", 0) != 0) gb_argv.push_back(a.data());
  int gb_argc = int(gb_argv.size());
  benchmark::Initialize(&gb_argc, gb_argv.data());
  if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

  context("world_size", std::to_string(topo_.size));
  context("nodes", std::to_string(topo_.nodes));
  context("ranks_per_node", topo_.uniform() ? std::to_string(topo_.local_size) : "unequal");
  context("nodes_from", topo_.declared ? "--ranks-per-node" : "shared memory");
  context("backend", backend_name(backend));
  context("library", comm_->library_version());
  context("mpi_library", mpi_library_version());
  context("host", host_name());
  context("cpu_model", cpu_model());
  if (backend == Backend::nccl) {
    context("gpu_model", gpu_model());
    context("cuda", cuda_version());
  }
  context("git_revision", ZB_GIT_REVISION);
  context("command_line", command_line_);
  context("iterations", std::to_string(iters_));
  context("warmup", std::to_string(warmup_));
  context("collective_algorithms", algorithm_settings());
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

void Driver::context(const std::string& key, const std::string& value) {
  benchmark::AddCustomContext(key, value);
}

void Driver::add(const std::string& name, std::function<Status(Run&)> body) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [this, body](benchmark::State& state) {
                                 Run run(*this, state);
                                 Status s = body(run);
                                 if (!s) abort_job(s);
                               })
      ->Iterations(iters_)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

namespace {

// Per-iteration local times and socket writes, reduced over ranks once at the end.
struct Samples {
  std::vector<double> local;
  int64_t writes = 0;
  bool counted = true;

  Status timed(const std::function<Status()>& body) {
    int64_t w0 = process_write_bytes();
    double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(body());
    local.push_back(now_seconds() - t0);
    int64_t w1 = process_write_bytes();
    counted = counted && w0 >= 0 && w1 >= 0;
    writes += w1 - w0;
    return Status::ok();
  }

  // The maximum over ranks of each iteration, and the statistics of those maxima.
  Status fill(Driver& d, Timing* out) const {
    Timing t;
    t.iterations = int64_t(local.size());
    t.times = local;
    ZB_RETURN_IF_ERROR(d.max_over_ranks(&t.times));
    size_t n = t.times.size();
    if (n) {
      double sum = 0;
      for (double x : t.times) sum += x;
      t.mean_s = sum / double(n);
      t.min_s = *std::min_element(t.times.begin(), t.times.end());
      t.median_s = median(t.times);
      t.p99_s = quantile(t.times, 0.99);
    }
    t.write_bytes = counted && n ? double(writes) / double(n) : -1;
    *out = std::move(t);
    return Status::ok();
  }
};

}  // namespace

Status Run::per_iteration(const std::function<Status()>& iteration, Timing* out) {
  Driver& d = driver_;
  for (int64_t i = 0; i < d.warmup(); ++i) ZB_RETURN_IF_ERROR(iteration());
  ZB_RETURN_IF_ERROR(d.comm().barrier());
  Samples s;
  for (int64_t i = 0; i < d.iterations(); ++i) ZB_RETURN_IF_ERROR(s.timed(iteration));
  return s.fill(d, out);
}

Status Run::batch(const std::function<Status()>& issue, const std::function<Status()>& complete,
                  Timing* out) {
  Driver& d = driver_;
  for (int64_t i = 0; i < d.warmup(); ++i) {
    ZB_RETURN_IF_ERROR(issue());
    ZB_RETURN_IF_ERROR(complete());
  }
  ZB_RETURN_IF_ERROR(d.comm().barrier());
  const int64_t iters = d.iterations();
  Samples s;
  ZB_RETURN_IF_ERROR(s.timed([&]() -> Status {
    for (int64_t i = 0; i < iters; ++i) ZB_RETURN_IF_ERROR(issue());
    return complete();
  }));
  Timing whole;
  ZB_RETURN_IF_ERROR(s.fill(d, &whole));
  Timing t;
  t.iterations = iters;
  t.mean_s = t.min_s = t.median_s = t.p99_s = whole.mean_s / double(iters);
  t.write_bytes = whole.write_bytes < 0 ? -1 : whole.write_bytes / double(iters);
  *out = t;
  return Status::ok();
}

Status Run::interleaved(const std::vector<Variant>& variants, std::vector<Timing>* out) {
  Driver& d = driver_;
  std::vector<Samples> samples(variants.size());
  for (int64_t i = 0; i < d.warmup() + d.iterations(); ++i)
    for (size_t k = 0; k < variants.size(); ++k) {
      const Variant& v = variants[k];
      if (v.before) ZB_RETURN_IF_ERROR(v.before());
      if (i >= d.warmup()) ZB_RETURN_IF_ERROR(samples[k].timed(v.body));
      else ZB_RETURN_IF_ERROR(v.body());
      if (v.after) ZB_RETURN_IF_ERROR(v.after());
    }
  out->resize(variants.size());
  for (size_t k = 0; k < variants.size(); ++k) ZB_RETURN_IF_ERROR(samples[k].fill(d, &(*out)[k]));
  return Status::ok();
}

void Run::report(const Timing& t) {
  size_t i = 0;
  for (auto _ : state_) {
    state_.SetIterationTime(i < t.times.size() ? t.times[i] : t.mean_s);
    ++i;
  }
}

void Run::counter(const std::string& name, double value) { state_.counters[name] = value; }

Status Driver::max_over_ranks(std::vector<double>* values) {
  std::vector<double> local = *values;
  if (!local.empty())
    ZB_MPI_CHECK(MPI_Allreduce(local.data(), values->data(), int(local.size()), MPI_DOUBLE, MPI_MAX,
                               driver_comm_));
  return Status::ok();
}

double Driver::max_over_ranks(double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, driver_comm_);
  return out;
}

double Driver::sum_over_ranks(double v) {
  double out = v;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, driver_comm_);
  return out;
}

double Driver::max_over_nodes(double v) {
  std::vector<double> all(size_t(topo_.size));
  MPI_Allgather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, driver_comm_);
  std::vector<double> per_node(size_t(topo_.nodes), 0.0);
  for (size_t r = 0; r < all.size(); ++r) per_node[size_t(topo_.node_of[r])] += all[r];
  return *std::max_element(per_node.begin(), per_node.end());
}

void Driver::mark_failed(const std::string& why) {
  if (!failed_ && root()) std::fprintf(stderr, "%s: check failed: %s\n", program().c_str(), why.c_str());
  failed_ = true;
}

void Driver::abort_job(const Status& status) {
  std::fprintf(stderr, "%s: error: %s\n", program().c_str(), status.message().c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
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
  int failed = failed_ ? 1 : 0, any = 0;
  if (root() && !json_path_.empty()) {
    Status s = write_file_atomically(json_path_, json.str());
    if (!s) {
      std::fprintf(stderr, "%s: %s\n", program().c_str(), s.message().c_str());
      failed = 1;  // still joins the reduction below, which the other ranks wait in
    }
  }
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, driver_comm_);
  return any ? 1 : 0;
}

}  // namespace zb
