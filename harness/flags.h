// Command-line flags: declared once with their help text; bad input becomes one clear line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/status.h"

namespace zb {

class Flags {
 public:
  explicit Flags(std::string program, std::string summary = "");

  void add_bool(const std::string& name, bool* out, const std::string& help);
  void add_int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
               int64_t max);
  void add_double(const std::string& name, double* out, const std::string& help, double min,
                  double max);
  // Byte sizes: 4194304, 4M, 4MiB, 1.5G (K, M, G, T are powers of 1024).
  void add_bytes(const std::string& name, uint64_t* out, const std::string& help,
                 uint64_t min = 0);
  void add_string(const std::string& name, std::string* out, const std::string& help);
  void add_choice(const std::string& name, std::string* out, const std::string& help,
                  std::vector<std::string> allowed);
  // Comma-separated subset of `allowed`, in the order given, without repeats.
  void add_list(const std::string& name, std::vector<std::string>* out, const std::string& help,
                std::vector<std::string> allowed);

  // Parses --name=value and --name value; --flag alone sets a bool, --no-flag clears it.
  // Arguments starting with --benchmark_ are passed through to Google Benchmark.
  // `help_requested` is set on --help/-h; any other unknown argument is an error.
  Status parse(int argc, char** argv, std::vector<std::string>* passthrough, bool* help_requested);

  std::string usage() const;
  // For defaults a program changes after declaring the flag, so --help tells the truth.
  void set_default_text(const std::string& name, const std::string& text);
  // Programs that run no benchmark (zb_plan) reject --benchmark_* instead of passing it on.
  void allow_benchmark_flags(bool allow) { benchmark_flags_ = allow; }
  const std::string& program() const { return program_; }

 private:
  struct Flag {
    std::string name, help, value_hint, default_text;
    bool is_bool = false;
    std::function<Status(const std::string&)> set;
  };
  void add(Flag flag);
  std::string program_, summary_;
  bool benchmark_flags_ = true;
  std::vector<Flag> flags_;
};

// Parsers shared with flags that are more structured than one value.
Status parse_bytes(const std::string& text, uint64_t* out);
Status parse_double(const std::string& text, double* out);
Status parse_int(const std::string& text, int64_t* out);
std::vector<std::string> split(const std::string& text, char sep);
std::string join(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace zb
