// Command-line flags: parsing, range checks and the --help text.
#include "harness/flags.h"

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

Flags::Flags(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void Flags::add(Flag flag) { flags_.push_back(std::move(flag)); }

void Flags::add_bool(const std::string& name, bool* out, const std::string& help) {
  add({name, help, "", *out ? "true" : "false", true, [out, name](const std::string& v) {
         if (v == "" || v == "true" || v == "1" || v == "yes" || v == "on") *out = true;
         else if (v == "false" || v == "0" || v == "no" || v == "off") *out = false;
         else return Status::error("--" + name + " takes true or false, not '" + v + "'");
         return Status::ok();
       }});
}

void Flags::add_int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
                    int64_t max) {
  add({name, help, "N", std::to_string(*out), false,
       [=](const std::string& v) {
         int64_t x = 0;
         Status s = parse_int(v, &x);
         if (!s) return Status::error("--" + name + ": " + s.message());
         if (x < min || x > max)
           return Status::error("--" + name + " must be in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], not " + v);
         *out = x;
         return Status::ok();
       }});
}

void Flags::add_double(const std::string& name, double* out, const std::string& help,
                       double min, double max) {
  std::ostringstream def;
  def << *out;
  add({name, help, "X", def.str(), false, [=](const std::string& v) {
         double x = 0;
         Status s = parse_double(v, &x);
         if (!s) return Status::error("--" + name + ": " + s.message());
         if (x < min || x > max) {
           std::ostringstream msg;
           msg << "--" << name << " must be in [" << min << ", " << max << "], not " << v;
           return Status::error(msg.str());
         }
         *out = x;
         return Status::ok();
       }});
}

void Flags::add_bytes(const std::string& name, uint64_t* out, const std::string& help,
                      uint64_t min) {
  add({name, help, "BYTES", std::to_string(*out), false, [=](const std::string& v) {
         uint64_t x = 0;
         Status s = parse_bytes(v, &x);
         if (!s) return Status::error("--" + name + ": " + s.message());
         if (x < min)
           return Status::error("--" + name + " must be at least " + std::to_string(min) +
                                " bytes, not " + v);
         *out = x;
         return Status::ok();
       }});
}

void Flags::add_string(const std::string& name, std::string* out, const std::string& help) {
  add({name, help, "TEXT", *out, false, [=](const std::string& v) {
         if (v.empty()) return Status::error("--" + name + " needs a value");
         *out = v;
         return Status::ok();
       }});
}

void Flags::add_choice(const std::string& name, std::string* out, const std::string& help,
                       std::vector<std::string> allowed) {
  std::string hint = join(allowed, "|");
  add({name, help, hint, *out, false, [=](const std::string& v) {
         for (const auto& a : allowed)
           if (v == a) {
             *out = v;
             return Status::ok();
           }
         return Status::error("--" + name + "='" + v + "' is not allowed; use one of " + hint);
       }});
}

void Flags::add_list(const std::string& name, std::vector<std::string>* out,
                     const std::string& help, std::vector<std::string> allowed) {
  std::string hint = join(allowed, ",");
  add({name, help, "A,B,...", join(*out, ","), false, [=](const std::string& v) {
         std::vector<std::string> picked;
         for (const auto& item : split(v, ',')) {
           bool known = false;
           for (const auto& a : allowed) known = known || item == a;
           if (!known)
             return Status::error("--" + name + ": '" + item + "' is not one of " + hint);
           for (const auto& p : picked)
             if (p == item) return Status::error("--" + name + ": '" + item + "' given twice");
           picked.push_back(item);
         }
         if (picked.empty()) return Status::error("--" + name + " needs at least one of " + hint);
         *out = picked;
         return Status::ok();
       }});
}

Status Flags::parse(int argc, char** argv, std::vector<std::string>* passthrough,
                    bool* help_requested) {
  *help_requested = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help_requested = true;
      continue;
    }
    if (benchmark_flags_ && arg.rfind("--benchmark_", 0) == 0) {
      passthrough->push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      return Status::error("unexpected argument '" + arg + "' (see --help)");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const Flag* found = nullptr;
    bool negated = false;
    for (const auto& f : flags_) {
      if (f.name == name) found = &f;
      if (f.is_bool && "no-" + f.name == name) found = &f, negated = true;
    }
    if (!found) return Status::error("unknown flag --" + name + " (see --help)");
    if (negated) {
      if (has_value) return Status::error("--" + name + " takes no value");
      value = "false";
    } else if (!has_value && !found->is_bool) {
      if (i + 1 >= argc) return Status::error("--" + name + " needs a value");
      value = argv[++i];
    }
    ZB_RETURN_IF_ERROR(found->set(value));
  }
  return Status::ok();
}

void Flags::set_default_text(const std::string& name, const std::string& text) {
  for (auto& f : flags_)
    if (f.name == name) f.default_text = text;
}

std::string Flags::usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]"
      << (benchmark_flags_ ? " [--benchmark_* flags of Google Benchmark]" : "") << "\n";
  if (!summary_.empty()) out << summary_ << "\n";
  out << "\nflags:\n";
  for (const auto& f : flags_) {
    std::string head = "  --" + f.name + (f.value_hint.empty() ? "" : "=" + f.value_hint);
    out << head;
    if (head.size() < 30) out << std::string(30 - head.size(), ' ');
    else out << "\n" << std::string(30, ' ');
    out << f.help;
    if (!f.default_text.empty()) out << " (default " << f.default_text << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace zb
