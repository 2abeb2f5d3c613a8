// Command-line flags: parsing, range checks and the --help text.
#include "harness/driver/flags.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace zb {

Status parse_count(const std::string& text, uint64_t* out) {
  std::string digits = text;
  double scale = 1;
  if (!digits.empty()) {
    const char suffix = digits.back();
    const double scales[] = {1e3, 1e6, 1e9, 1e12};
    for (int i = 0; i < 4; ++i)
      if (suffix == "KMGT"[i]) scale = scales[i];
    if (scale > 1) digits.pop_back();
  }
  double v = 0;
  if (!parse_double(digits, &v) || !(v >= 0))
    return Status::error("'" + text + "' is not a count (e.g. 16000000, 16e6 or 16M; K, M, G, T "
                         "are 1e3, 1e6, 1e9, 1e12)");
  v *= scale;
  const double whole = std::round(v);
  // 1.1M is 1100000.0000000002 in binary: a count within rounding of a whole number is one.
  if (std::fabs(v - whole) > 1e-9 * std::max(1.0, whole) || whole >= 9.2e18)
    return Status::error("'" + text + "' is not a whole number of parameters");
  *out = uint64_t(whole);
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

void Flags::add_count(const std::string& name, uint64_t* out, const std::string& help, uint64_t min,
                      uint64_t max) {
  add({name, help, "COUNT", std::to_string(*out), false, [=](const std::string& v) {
         uint64_t x = 0;
         Status s = parse_count(v, &x);
         if (!s) return Status::error("--" + name + ": " + s.message());
         if (x < min || x > max)
           return Status::error("--" + name + " must be in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], not " + v);
         *out = x;
         return Status::ok();
       }});
}

namespace {

// A comma list of `name`'s items, each read by `one` (which says what is wrong with an item),
// without repeats; `form` names the list's shape in the messages ("N or a list N,N,...").
template <typename T>
Status parse_list(const std::string& name, const std::string& v, const std::string& form,
                  const std::function<Status(const std::string&, T*)>& one, std::vector<T>* out) {
  std::vector<T> picked;
  std::vector<std::string> items = split(v, ',');
  if (!v.empty() && v.back() == ',') items.push_back("");  // split drops a last empty item
  for (const std::string& item : items) {
    T x{};
    Status s = one(item, &x);
    if (!s) return Status::error("--" + name + ": " + s.message() + "; give " + form);
    for (const T& seen : picked)
      if (seen == x) return Status::error("--" + name + ": " + item + " given twice");
    picked.push_back(x);
  }
  if (picked.empty()) return Status::error("--" + name + " needs a value: " + form);
  *out = picked;
  return Status::ok();
}

}  // namespace

void Flags::add_ints(const std::string& name, std::vector<int64_t>* out, const std::string& help,
                     int64_t min, int64_t max) {
  std::vector<std::string> current;
  for (int64_t v : *out) current.push_back(std::to_string(v));
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  add({name, help, "N,N,...", join(current, ","), false, [=](const std::string& v) {
         return parse_list<int64_t>(name, v, "N or a list N,N,...", [&](const std::string& item, int64_t* x) {
           if (!parse_int(item, x) || *x < min || *x > max)
             return Status::error("'" + item + "' is not a whole number in " + range);
           return Status::ok();
         }, out);
       }});
}

void Flags::add_bytes_list(const std::string& name, std::vector<uint64_t>* out, const std::string& help) {
  std::vector<std::string> current;
  for (uint64_t v : *out) current.push_back(std::to_string(v));
  add({name, help, "BYTES,BYTES,...", join(current, ","), false, [=](const std::string& v) {
         return parse_list<uint64_t>(name, v, "BYTES or a list BYTES,BYTES,...", parse_bytes, out);
       }});
}

void Flags::add_string(const std::string& name, std::string* out, const std::string& help) {
  add({name, help, "TEXT", *out, false, [=](const std::string& v) {
         if (v.empty()) return Status::error("--" + name + " needs a value");
         *out = v;
         return Status::ok();
       }});
}

// The text forms are the typed ones with every name standing for itself.
static Choices<std::string> identity(const std::vector<std::string>& names) {
  Choices<std::string> out;
  for (const auto& n : names) out.push_back({n, n});
  return out;
}

void Flags::add_choice(const std::string& name, std::string* out, const std::string& help,
                       std::vector<std::string> allowed) {
  add_choice<std::string>(name, out, help, identity(allowed));
}

void Flags::add_list(const std::string& name, std::vector<std::string>* out,
                     const std::string& help, std::vector<std::string> allowed) {
  add_list<std::string>(name, out, help, identity(allowed));
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

namespace {

// `text` filled into lines of at most `width` columns (a word longer than a line stands alone),
// the first line starting at column `first`, the rest indented to `indent`. A line break in
// `text` is kept: each of its lines is filled on its own.
std::string wrap(const std::string& text, size_t first, size_t indent, size_t width = 100) {
  std::istringstream paragraphs(text);
  std::string out, paragraph;
  size_t col = first;
  for (bool first_paragraph = true; std::getline(paragraphs, paragraph); first_paragraph = false) {
    if (!first_paragraph) out += "\n" + std::string(indent, ' '), col = indent;
    std::istringstream words(paragraph);
    std::string word;
    bool line_empty = true;
    while (words >> word) {
      if (!line_empty && col + 1 + word.size() > width) {
        out += "\n" + std::string(indent, ' ');
        col = indent;
        line_empty = true;
      }
      if (!line_empty) out += ' ', ++col;
      out += word;
      col += word.size();
      line_empty = false;
    }
  }
  return out;
}

}  // namespace

std::string Flags::usage() const {
  constexpr size_t kColumn = 30;  // where each flag's description starts
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]"
      << (benchmark_flags_ ? " [--benchmark_* flags of Google Benchmark]" : "") << "\n";
  if (!summary_.empty()) out << wrap(summary_, 0, 0) << "\n";
  out << "\nflags:\n";
  for (const auto& f : flags_) {
    std::string head = "  --" + f.name + (f.value_hint.empty() ? "" : "=" + f.value_hint);
    out << head;
    if (head.size() < kColumn) out << std::string(kColumn - head.size(), ' ');
    else out << "\n" << std::string(kColumn, ' ');
    std::string help = f.help;
    // A description that already says its default ("(default 0: ..." where the default is 0, or
    // "(default: ..." for a value that stands for something else) is not given a second one.
    const bool says_default = help.find("(default " + f.default_text) != std::string::npos ||
                              help.find("(default:") != std::string::npos;
    if (!f.default_text.empty() && !says_default)
      help += " (default " + f.default_text + ")";
    out << wrap(help, kColumn, kColumn) << "\n";
  }
  return out.str();
}

}  // namespace zb
