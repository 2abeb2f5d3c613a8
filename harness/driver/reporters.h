// Google Benchmark reporters: silence for ranks other than 0, and a tee to console + JSON.
#pragma once

#include <benchmark/benchmark.h>

namespace zb {

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Google Benchmark only accepts a file reporter together with --benchmark_out, and opens
// that file itself; the tee lets the driver write --json atomically instead.
class TeeReporter : public benchmark::BenchmarkReporter {
 public:
  TeeReporter(benchmark::BenchmarkReporter* a, benchmark::BenchmarkReporter* b) : a_(a), b_(b) {}
  bool ReportContext(const Context& c) override {
    bool ok = a_->ReportContext(c);
    return (b_ ? b_->ReportContext(c) : true) && ok;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    a_->ReportRuns(runs);
    if (b_) b_->ReportRuns(runs);
  }
  void Finalize() override {
    a_->Finalize();
    if (b_) b_->Finalize();
  }

 private:
  benchmark::BenchmarkReporter* a_;
  benchmark::BenchmarkReporter* b_;
};

}  // namespace zb
