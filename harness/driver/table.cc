// Table: column widths from the widest cell, right-aligned.
#include "harness/driver/table.h"

#include <algorithm>
#include <cmath>

namespace zb {

void Table::print(FILE* out) const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size() + (c == 0 ? 2 : 0);
    for (const auto& r : rows_)
      if (c < r.size()) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string s;
    for (size_t c = 0; c < width.size(); ++c) {
      std::string cell = c < cells.size() ? cells[c] : "";
      if (header && c == 0) cell = "# " + cell;
      s += (c ? "  " : "") + std::string(width[c] - std::min(width[c], cell.size()), ' ') + cell;
    }
    std::fprintf(out, "%s\n", s.c_str());
  };
  line(headers_, true);
  for (const auto& r : rows_) line(r, false);
}

std::string fmt(double value, int decimals) {
  if (std::isnan(value)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

}  // namespace zb
