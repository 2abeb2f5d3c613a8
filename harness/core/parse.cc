// Parsers of numbers, byte sizes and lists: strict, so a bad value is an error, never a guess.
#include "harness/core/parse.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace zb {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(text);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

Status parse_double(const std::string& text, double* out) {
  if (text.empty()) return Status::error("empty number");
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v))
    return Status::error("'" + text + "' is not a number");
  *out = v;
  return Status::ok();
}

Status parse_int(const std::string& text, int64_t* out) {
  if (text.empty()) return Status::error("empty integer");
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size())
    return Status::error("'" + text + "' is not an integer");
  *out = v;
  return Status::ok();
}

Status parse_bytes(const std::string& text, uint64_t* out) {
  std::string num = text, unit;
  size_t pos = num.find_first_not_of("0123456789.eE+");
  if (pos != std::string::npos) {
    unit = num.substr(pos);
    num = num.substr(0, pos);
  }
  double v = 0;
  if (!parse_double(num, &v) || v < 0)
    return Status::error("'" + text + "' is not a byte size (examples: 4096, 64K, 4M, 1G)");
  double scale = 1;
  if (!unit.empty()) {
    char u = char(std::toupper(unsigned(unit[0])));
    std::string rest = unit.substr(1);
    if (rest != "" && rest != "B" && rest != "iB")
      return Status::error("'" + text + "' has an unknown unit (use K, M, G or T)");
    if (u == 'B' && rest.empty()) scale = 1;
    else if (u == 'K') scale = 1024.0;
    else if (u == 'M') scale = 1024.0 * 1024;
    else if (u == 'G') scale = 1024.0 * 1024 * 1024;
    else if (u == 'T') scale = 1024.0 * 1024 * 1024 * 1024;
    else return Status::error("'" + text + "' has an unknown unit (use K, M, G or T)");
  }
  double bytes = v * scale;
  if (bytes != std::floor(bytes) || bytes > 9.0e18)
    return Status::error("'" + text + "' is not a whole number of bytes");
  *out = uint64_t(bytes);
  return Status::ok();
}

}  // namespace zb
