// Command-line flags: declared once with their help text; bad input becomes one clear line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/parse.h"
#include "harness/core/status.h"

namespace zb {

// Counts of parameters: 16000000, 16e6, 16M, 1.5G (K, M, G, T are 1e3, 1e6, 1e9, 1e12), a
// whole number; every parameter flag of every program reads its value with this.
Status parse_count(const std::string& text, uint64_t* out);

// Named values of a typed flag, in the order --help lists them.
template <typename T>
using Choices = std::vector<std::pair<std::string, T>>;

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
  // Byte sizes as add_bytes reads them, one or a comma list (0,16M), without repeats: sizes a
  // program runs each benchmark at (zb_collectives --footprint).
  void add_bytes_list(const std::string& name, std::vector<uint64_t>* out, const std::string& help);
  // Parameter counts, decimal (parse_count).
  void add_count(const std::string& name, uint64_t* out, const std::string& help, uint64_t min,
                 uint64_t max);
  // Whole numbers in [min, max], one or a comma list (2 or 1,2,4), without repeats: counts a
  // program runs one benchmark or table each for (--slots, --microbatches, --dp).
  void add_ints(const std::string& name, std::vector<int64_t>* out, const std::string& help,
                int64_t min, int64_t max);
  void add_string(const std::string& name, std::string* out, const std::string& help);
  void add_choice(const std::string& name, std::string* out, const std::string& help,
                  std::vector<std::string> allowed);
  // Comma-separated subset of `allowed`, in the order given, without repeats.
  void add_list(const std::string& name, std::vector<std::string>* out, const std::string& help,
                std::vector<std::string> allowed);
  // The same two with each name mapped to a typed value, so the program reads the value it
  // needs and never parses the text a second time.
  template <typename T>
  void add_choice(const std::string& name, T* out, const std::string& help, Choices<T> values);
  template <typename T>
  void add_list(const std::string& name, std::vector<T>* out, const std::string& help,
                Choices<T> values);

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
  // The names of `values`, and the name of `value` among them ("" when absent).
  template <typename T>
  static std::vector<std::string> names(const Choices<T>& values, const T* value, std::string* name);
  std::string program_, summary_;
  bool benchmark_flags_ = true;
  std::vector<Flag> flags_;
};

template <typename T>
std::vector<std::string> Flags::names(const Choices<T>& values, const T* value, std::string* name) {
  std::vector<std::string> out;
  for (const auto& [n, v] : values) {
    out.push_back(n);
    if (value && v == *value && name->empty()) *name = n;
  }
  return out;
}

template <typename T>
void Flags::add_choice(const std::string& name, T* out, const std::string& help, Choices<T> values) {
  std::string current;
  const std::string hint = join(names(values, out, &current), "|");
  add({name, help, hint, current, false, [=](const std::string& v) {
         for (const auto& [n, value] : values)
           if (n == v) {
             *out = value;
             return Status::ok();
           }
         return Status::error("--" + name + "='" + v + "' is not allowed; use one of " + hint);
       }});
}

template <typename T>
void Flags::add_list(const std::string& name, std::vector<T>* out, const std::string& help,
                     Choices<T> values) {
  std::vector<std::string> current;
  for (const T& x : *out) {
    std::string n;
    names(values, &x, &n);
    current.push_back(n);
  }
  std::string unused;
  const std::string hint = join(names<T>(values, nullptr, &unused), ",");
  add({name, help, "A,B,...", join(current, ","), false, [=](const std::string& v) {
         std::vector<T> picked;
         std::vector<std::string> seen;
         std::vector<std::string> items = split(v, ',');
         if (!v.empty() && v.back() == ',') items.push_back("");  // split drops a last empty item
         for (const auto& item : items) {
           const T* found = nullptr;
           for (const auto& [n, value] : values)
             if (n == item) found = &value;
           if (!found) return Status::error("--" + name + ": '" + item + "' is not one of " + hint);
           for (const auto& p : seen)
             if (p == item) return Status::error("--" + name + ": '" + item + "' given twice");
           seen.push_back(item);
           picked.push_back(*found);
         }
         if (picked.empty()) return Status::error("--" + name + " needs at least one of " + hint);
         *out = picked;
         return Status::ok();
       }});
}

}  // namespace zb
