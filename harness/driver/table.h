// Table: aligned console tables in the spirit of nccl-tests, printed by rank 0.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace zb {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  bool empty() const { return rows_.empty(); }
  // Right-aligned columns; a leading '#' marks the header as a comment line for scripts.
  void print(FILE* out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "%.*f" without the iostream ceremony; NaN prints as "n/a".
std::string fmt(double value, int decimals);

}  // namespace zb
