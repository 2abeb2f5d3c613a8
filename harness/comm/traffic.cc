// Traffic: collective accounting and the socket write counter.
#include "harness/comm/traffic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace zb {

namespace {
constexpr Coll kAllColls[] = {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather, Coll::all_to_all};
}  // namespace

const char* coll_name(Coll op) {
  switch (op) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::all_gather: return "all_gather";
    case Coll::all_to_all: return "all_to_all";
  }
  return "?";
}

bool parse_coll(const std::string& text, Coll* out) {
  for (Coll c : kAllColls)
    if (text == coll_name(c)) {
      *out = c;
      return true;
    }
  return false;
}

const char* group_name(Group group) {
  switch (group) {
    case Group::world: return "world";
    case Group::node: return "node";
    case Group::cross: return "cross";
  }
  return "?";
}

std::string collective_label(const CollRecord& rec) {
  char buf[96];
  double b = double(rec.bytes());
  if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else if (b >= 1 << 10) std::snprintf(buf, sizeof buf, "%.1f KiB", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  std::string over = rec.group == Group::world ? "" : std::string(" over ") + group_name(rec.group);
  return std::string(coll_name(rec.op)) + " " + buf + " (" + dtype_name(rec.dtype) + ")" + over;
}

std::vector<std::pair<std::string, Coll>> coll_choices() {
  std::vector<std::pair<std::string, Coll>> out;
  for (Coll c : kAllColls) out.push_back({coll_name(c), c});
  return out;
}

double busbw_factor(Coll op, int ranks) {
  double n = ranks;
  return op == Coll::all_reduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

double ideal_wire_bytes(Coll op, uint64_t bytes, int ranks) {
  return busbw_factor(op, ranks) * double(bytes);
}

double volume_elements(const CollRecord& rec) {
  return (rec.op == Coll::all_reduce ? 2.0 : 1.0) * double(rec.count);
}

size_t TrafficLog::add(const CollRecord& rec) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(rec);
  return records_.size() - 1;
}

CollRecord TrafficLog::record(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < records_.size() ? records_[index] : CollRecord{};
}

void TrafficLog::complete(size_t index, int64_t wire_bytes, double start_s, double end_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= records_.size()) return;
  records_[index].wire_measured = wire_bytes;
  records_[index].start_s = start_s;
  records_[index].end_s = end_s;
}

void TrafficLog::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  records_.clear();
}

void TrafficLog::reserve(size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t size = records_.size();
  if (records_.capacity() >= size + count) return;
  records_.resize(size + count);
  records_.resize(size);
}

size_t TrafficLog::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.size();
}

std::vector<CollRecord> TrafficLog::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

double TrafficLog::volume_elements() const {
  double v = 0;
  for (const auto& r : records()) v += zb::volume_elements(r);
  return v;
}

double TrafficLog::ideal_wire_bytes(int ranks) const {
  double b = 0;
  for (const auto& r : records()) b += zb::ideal_wire_bytes(r.op, r.bytes(), r.ranks ? r.ranks : ranks);
  return b;
}

double TrafficLog::measured_volume_elements(int ranks) const {
  double v = 0;
  for (const auto& r : records()) {
    int n = r.ranks ? r.ranks : ranks;
    if (r.wire_measured < 0 || n < 2) return std::nan("");
    v += double(r.wire_measured) / (double(n - 1) / double(n)) / double(dtype_size(r.dtype));
  }
  return v;
}

int64_t process_write_bytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  return -1;
}

static std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool socket_transport(const std::string& backend, int ranks, std::string* why_not) {
  if (process_write_bytes() < 0) {
    *why_not = "/proc/self/io is not readable";
    return false;
  }
  if (ranks == 1) return true;  // nothing goes on any wire: 0 measured is the truth
  if (backend == "gloo") return true;  // Gloo's TCP pairs write every byte with writev()
  if (backend == "mpi") {
    std::string btl = env("OMPI_MCA_btl");
    bool tcp_only = btl == "tcp,self" || btl == "self,tcp" || btl == "tcp";
    bool no_shm = !btl.empty() && btl[0] == '^' &&
                  (btl.find("vader") != std::string::npos || btl.find("sm") != std::string::npos);
    std::string pml = env("OMPI_MCA_pml");
    if ((tcp_only || no_shm) && (pml.empty() || pml == "ob1")) return true;
    *why_not = "Open MPI may use shared memory or a non-socket network (run with --mca btl "
               "tcp,self --mca pml ob1 to measure)";
    return false;
  }
  if (env("NCCL_P2P_DISABLE") == "1" && env("NCCL_SHM_DISABLE") == "1" &&
      env("NCCL_NET") == "Socket")
    return true;
  *why_not = "NCCL moves data over NVLink/PCIe/shared memory (set NCCL_P2P_DISABLE=1 "
             "NCCL_SHM_DISABLE=1 NCCL_NET=Socket to measure over sockets)";
  return false;
}

void add_comm_spans(Trace& trace, const TrafficLog& log, size_t first, double origin_s,
                    const std::function<std::string(size_t)>& args, size_t end) {
  std::vector<CollRecord> recs = log.records();
  for (size_t i = first; i < std::min(end, recs.size()); ++i) {
    if (recs[i].start_s < 0) continue;
    char issued[48];
    std::snprintf(issued, sizeof issued, "%.3f", (recs[i].issued_s - origin_s) * 1e6);
    trace.add({collective_label(recs[i]), Track::comm, recs[i].start_s, recs[i].end_s,
               "\"log\": " + std::to_string(i) + ", " + args(i) + ", \"bytes\": " + std::to_string(recs[i].bytes()) +
                   ", \"in_place\": " + (recs[i].in_place ? "true" : "false") + ", \"issued_us\": " + issued});
  }
}

}  // namespace zb
