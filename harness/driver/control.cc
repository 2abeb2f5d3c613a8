// Control plane: the operations as rounds through rank 0, the stall fault, the timeout line.
#include "harness/driver/control.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace zb {
namespace {

std::string pack(const std::vector<double>& values) {
  std::string out(values.size() * sizeof(double), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<double> unpack(const std::string& bytes) {
  std::vector<double> out(bytes.size() / sizeof(double));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(double));
  return out;
}

}  // namespace

const char* wait_name(Wait kind) {
  switch (kind) {
    case Wait::barrier: return "barrier";
    case Wait::reduction: return "reduction";
    case Wait::fence: return "fence";
    case Wait::trace: return "trace";
    case Wait::final: return "final";
  }
  return "?";
}

const char* wait_phrase(Wait kind) {
  switch (kind) {
    case Wait::barrier: return "barrier";
    case Wait::reduction: return "reduction";
    case Wait::fence: return "node-window fence";
    case Wait::trace: return "trace gathering";
    case Wait::final: return "final reduction";
  }
  return "?";
}

std::vector<std::pair<std::string, Wait>> wait_choices() {
  std::vector<std::pair<std::string, Wait>> out;
  for (Wait w : {Wait::barrier, Wait::reduction, Wait::fence, Wait::trace, Wait::final})
    out.push_back({wait_name(w), w});
  return out;
}

double ControlPlane::peer_deadline_s() const {
  // Long enough for rank 0's line and its abort to reach every rank first.
  return timeout_s_ + 2.0 + 0.1 * timeout_s_ + (rank() == 1 ? 0.0 : 1.0);
}

Status ControlPlane::late(const std::string& what, double waited_s,
                          const std::vector<int>& missing) const {
  std::string ranks;
  for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", waited_s);
  return Status::error("timeout: rank " + std::to_string(rank()) + ": " + what +
                       " did not complete within " + secs + " s: rank" +
                       (missing.size() > 1 ? "s " : " ") + ranks + " had not arrived");
}

Status ControlPlane::run(Wait kind, const std::string& what, const std::string& part,
                         const Answer& answer, std::string* answer_out) {
  if (!stalled_ && stall_rank_ == rank() && stall_kind_ == kind) {
    stalled_ = true;
    std::raise(SIGSTOP);
  }
  std::string unused;
  return round(part, answer, answer_out ? answer_out : &unused,
               std::string("the driver's ") + wait_phrase(kind) + " (" + what + ")");
}

Status ControlPlane::barrier(Wait kind, const std::string& what) {
  return run(
      kind, what, "", [](const std::vector<std::string>&, std::string*) { return Status::ok(); },
      nullptr);
}

Status ControlPlane::reduce(std::vector<double>* values, bool take_max, Wait kind,
                            const std::string& what) {
  const size_t n = values->size();
  std::string out;
  ZB_RETURN_IF_ERROR(run(
      kind, what, pack(*values),
      [&](const std::vector<std::string>& parts, std::string* answer) -> Status {
        std::vector<double> acc = *values;
        for (size_t r = 1; r < parts.size(); ++r) {
          std::vector<double> v = unpack(parts[r]);
          if (v.size() != n)
            return Status::error(std::string("the driver's ") + wait_phrase(kind) + " (" + what +
                                 "): rank " + std::to_string(r) + " gave " +
                                 std::to_string(v.size()) + " values, rank 0 " + std::to_string(n));
          for (size_t i = 0; i < n; ++i) acc[i] = take_max ? std::max(acc[i], v[i]) : acc[i] + v[i];
        }
        *answer = pack(acc);
        return Status::ok();
      },
      &out));
  *values = unpack(out);
  return Status::ok();
}

Status ControlPlane::max(std::vector<double>* values, Wait kind, const std::string& what) {
  return reduce(values, true, kind, what);
}

Status ControlPlane::sum(std::vector<double>* values, Wait kind, const std::string& what) {
  return reduce(values, false, kind, what);
}

Status ControlPlane::all_gather(double value, std::vector<double>* out, Wait kind,
                                const std::string& what) {
  std::string all;
  ZB_RETURN_IF_ERROR(run(
      kind, what, pack({value}),
      [](const std::vector<std::string>& parts, std::string* answer) {
        for (const std::string& p : parts) *answer += p;
        return Status::ok();
      },
      &all));
  *out = unpack(all);
  return Status::ok();
}

Status ControlPlane::gather(const std::string& blob, std::vector<std::string>* out, Wait kind,
                            const std::string& what) {
  out->clear();
  return run(
      kind, what, blob,
      [&](const std::vector<std::string>& parts, std::string*) {
        *out = parts;
        return Status::ok();
      },
      nullptr);
}

Status ControlPlane::exchange(const std::string& blob, std::vector<std::string>* all, Wait kind,
                              const std::string& what) {
  std::string joined;
  ZB_RETURN_IF_ERROR(run(
      kind, what, blob,
      [](const std::vector<std::string>& parts, std::string* answer) {
        for (const std::string& p : parts) {
          const uint64_t n = p.size();
          answer->append(reinterpret_cast<const char*>(&n), sizeof n);
          *answer += p;
        }
        return Status::ok();
      },
      &joined));
  all->clear();
  for (size_t at = 0; at + sizeof(uint64_t) <= joined.size();) {
    uint64_t n = 0;
    std::memcpy(&n, joined.data() + at, sizeof n);
    all->push_back(joined.substr(at + sizeof n, n));
    at += sizeof n + n;
  }
  if (all->size() != size_t(size()))
    return Status::error(std::string("the driver's ") + wait_phrase(kind) + " (" + what + "): " +
                         std::to_string(all->size()) + " parts for " + std::to_string(size()) + " ranks");
  return Status::ok();
}

Status ControlPlane::broadcast(std::string* blob, Wait kind, const std::string& what) {
  return run(
      kind, what, rank() == 0 ? *blob : std::string(),
      [](const std::vector<std::string>& parts, std::string* answer) {
        *answer = parts[0];
        return Status::ok();
      },
      blob);
}

}  // namespace zb
