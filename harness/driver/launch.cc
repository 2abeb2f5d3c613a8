// Launch: the launcher's variables read, checked against each other, and the rendezvous named.
#include "harness/driver/launch.h"

#include <cctype>
#include <string>

#include "harness/core/parse.h"

namespace zb {
namespace {

// The variables of one launcher, read and checked; every error is one line naming the
// variable and the launcher.
class Reader {
 public:
  Reader(const EnvLookup& env, std::string launcher) : env_(env), launcher_(std::move(launcher)) {}

  bool has(const char* name) const {
    const char* v = env_(name);
    return v && *v;
  }
  std::string text(const char* name) const { return has(name) ? env_(name) : ""; }

  // A whole number >= `min`; `required` false leaves `*out` as it is when unset.
  Status number(const char* name, int64_t min, int64_t* out, bool required = true) const {
    if (!has(name)) {
      if (!required) return Status::ok();
      return Status::error(launcher_ + " launch: " + name + " is not set (" + given() + ")");
    }
    int64_t v = 0;
    if (!parse_int(env_(name), &v) || v < min)
      return Status::error(launcher_ + " launch: " + name + "='" + env_(name) +
                           "' is not a whole number of at least " + std::to_string(min));
    *out = v;
    return Status::ok();
  }

  // "a < b" must hold for two variables that were both given.
  Status below(const char* a, int64_t va, const char* b, int64_t vb) const {
    if (va < vb) return Status::ok();
    return Status::error(launcher_ + " launch: " + a + "=" + std::to_string(va) +
                         " contradicts " + b + "=" + std::to_string(vb) + " (" + a +
                         " must be below " + b + ")");
  }

  // The launcher's variables that are set, for a message about one that is not.
  void note(const char* name) {
    if (has(name)) given_ += (given_.empty() ? "" : ", ") + std::string(name);
  }
  std::string given() const { return given_.empty() ? "none of its variables is set" : given_ + " set"; }
  const std::string& launcher() const { return launcher_; }

 private:
  const EnvLookup& env_;
  std::string launcher_, given_;
};

Status read_port(const Reader& r, const char* name, int* port) {
  int64_t p = 0;
  ZB_RETURN_IF_ERROR(r.number(name, 1, &p));
  if (p > 65535)
    return Status::error(r.launcher() + " launch: " + name + "=" + std::to_string(p) +
                         " is not a TCP port (1 to 65535)");
  *port = int(p);
  return Status::ok();
}

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
Status torchrun_launch(const EnvLookup& env, Launch* l) {
  Reader r(env, "torchrun/Kubernetes");
  for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    r.note(n);
  int64_t rank = 0, size = 0, local_rank = -1, local_size = -1;
  ZB_RETURN_IF_ERROR(r.number("RANK", 0, &rank));
  ZB_RETURN_IF_ERROR(r.number("WORLD_SIZE", 1, &size));
  ZB_RETURN_IF_ERROR(r.below("RANK", rank, "WORLD_SIZE", size));
  ZB_RETURN_IF_ERROR(r.number("LOCAL_RANK", 0, &local_rank, false));
  ZB_RETURN_IF_ERROR(r.number("LOCAL_WORLD_SIZE", 1, &local_size, false));
  if (local_rank >= 0 && local_size > 0)
    ZB_RETURN_IF_ERROR(r.below("LOCAL_RANK", local_rank, "LOCAL_WORLD_SIZE", local_size));
  if (local_size > size)
    return Status::error(r.launcher() + " launch: LOCAL_WORLD_SIZE=" + std::to_string(local_size) +
                         " contradicts WORLD_SIZE=" + std::to_string(size) +
                         " (more ranks on this host than in the job)");
  if (local_rank >= 0) ZB_RETURN_IF_ERROR(r.below("LOCAL_RANK", local_rank, "WORLD_SIZE", size));
  l->kind = LaunchKind::torchrun;
  l->rank = int(rank), l->size = int(size), l->local_rank = int(local_rank), l->local_size = int(local_size);
  l->source = "RANK, WORLD_SIZE (torchrun or Kubernetes)";
  if (size > 1 || r.has("MASTER_ADDR") || r.has("MASTER_PORT")) {
    if (!r.has("MASTER_ADDR"))
      return Status::error(r.launcher() + " launch: MASTER_ADDR is not set (" + r.given() +
                           "): rank 0's host, where the ranks meet");
    l->host = r.text("MASTER_ADDR");
    ZB_RETURN_IF_ERROR(read_port(r, "MASTER_PORT", &l->port));
    // torchrun's agent keeps a store of its own on MASTER_PORT (and says so): the next port.
    if (r.text("TORCHELASTIC_USE_AGENT_STORE") == "True") {
      if (l->port == 65535)
        return Status::error(r.launcher() + " launch: MASTER_PORT=65535 is torchrun's own, and "
                             "the control plane needs the port after it");
      ++l->port;
    }
  }
  return Status::ok();
}

// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and the step's first host; MASTER_ADDR and
// MASTER_PORT override the host and the port when given.
Status slurm_launch(const EnvLookup& env, Launch* l) {
  Reader r(env, "Slurm (no PMI)");
  for (const char* n : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID",
                        "SLURM_STEP_NODELIST", "SLURM_JOB_ID"})
    r.note(n);
  int64_t rank = 0, size = 0, local = 0, step_tasks = -1, job = 0, step = 0;
  ZB_RETURN_IF_ERROR(r.number("SLURM_PROCID", 0, &rank));
  ZB_RETURN_IF_ERROR(r.number("SLURM_NTASKS", 1, &size));
  ZB_RETURN_IF_ERROR(r.below("SLURM_PROCID", rank, "SLURM_NTASKS", size));
  ZB_RETURN_IF_ERROR(r.number("SLURM_LOCALID", 0, &local));
  ZB_RETURN_IF_ERROR(r.below("SLURM_LOCALID", local, "SLURM_NTASKS", size));
  ZB_RETURN_IF_ERROR(r.number("SLURM_STEP_NUM_TASKS", 1, &step_tasks, false));
  if (step_tasks > 0 && step_tasks != size)
    return Status::error(r.launcher() + " launch: SLURM_NTASKS=" + std::to_string(size) +
                         " contradicts SLURM_STEP_NUM_TASKS=" + std::to_string(step_tasks));
  l->kind = LaunchKind::slurm;
  l->rank = int(rank), l->size = int(size), l->local_rank = int(local);
  l->source = "SLURM_PROCID, SLURM_NTASKS (a Slurm step without PMI)";
  if (size == 1) return Status::ok();
  if (r.has("MASTER_ADDR")) {
    l->host = r.text("MASTER_ADDR");
  } else {
    const char* list = r.has("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    l->host = first_slurm_host(r.text(list));
    if (l->host.empty())
      return Status::error(r.launcher() + " launch: " + list + "='" + r.text(list) +
                           "' names no host (rank 0's host, where the ranks meet)");
  }
  if (r.has("MASTER_PORT")) return read_port(r, "MASTER_PORT", &l->port);
  ZB_RETURN_IF_ERROR(r.number("SLURM_JOB_ID", 0, &job));
  ZB_RETURN_IF_ERROR(r.number("SLURM_STEP_ID", 0, &step));
  l->port = slurm_port(job, step);
  return Status::ok();
}

}  // namespace

const char* launch_name(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::none: return "none";
    case LaunchKind::mpi: return "mpi";
    case LaunchKind::torchrun: return "torchrun";
    case LaunchKind::slurm: return "slurm";
  }
  return "?";
}

std::string Launch::address() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string first_slurm_host(const std::string& list) {
  // The first entry (commas inside brackets belong to it), then its first range's start.
  std::string entry;
  int depth = 0;
  for (char c : list) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    entry += c;
  }
  const size_t open = entry.find('[');
  if (open == std::string::npos) return entry;
  std::string first;
  for (size_t i = open + 1; i < entry.size() && std::isalnum(static_cast<unsigned char>(entry[i])); ++i)
    first += entry[i];
  const size_t close = entry.find(']', open);
  return entry.substr(0, open) + first + (close == std::string::npos ? "" : entry.substr(close + 1));
}

int slurm_port(int64_t job_id, int64_t step_id) {
  // 12000 to 31999: below Linux's ephemeral ports (32768 on), so no outgoing connection
  // holds it; job ids spread over the range, consecutive steps of one job take the next port.
  return 12000 + int((job_id * 97 + step_id) % 20000);
}

int launcher_rank(const EnvLookup& env) {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK", "SLURM_PROCID"}) {
    const char* v = env(name);
    int64_t r = -1;
    if (v && *v && parse_int(v, &r)) return int(r);
  }
  return -1;
}

Status detect_launch(const EnvLookup& env, Launch* out) {
  Launch l;
  auto has = [&](const char* n) {
    const char* v = env(n);
    return v && *v;
  };
  // An MPI launcher: mpirun (Open MPI), PMIx (srun --mpi=pmix, prterun), PMI-1/2 (srun
  // --mpi=pmi2, MPICH's hydra). MPI finds the ranks itself; the variable only says who prints.
  for (const char* n : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    int64_t r = 0;
    if (has(n) && parse_int(env(n), &r)) {
      l.kind = LaunchKind::mpi;
      l.rank = int(r);
      l.source = n;
      // How many ranks it started on this host (Open MPI's mpirun, MPICH's hydra), where it
      // says: before MPI starts, only the launcher knows.
      for (const char* m : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
        int64_t local = 0;
        if (has(m) && parse_int(env(m), &local) && local > 0) {
          l.local_size = int(local);
          break;
        }
      }
      *out = l;
      return Status::ok();
    }
  }
  if (has("RANK") || has("WORLD_SIZE")) {
    ZB_RETURN_IF_ERROR(torchrun_launch(env, &l));
  } else if (has("SLURM_PROCID") && has("SLURM_STEP_ID")) {
    ZB_RETURN_IF_ERROR(slurm_launch(env, &l));
  } else {
    *out = l;  // nothing launched it: one process
    return Status::ok();
  }
  std::string id = has("TORCHELASTIC_RUN_ID") ? env("TORCHELASTIC_RUN_ID") : "";
  if (has("ZB_RENDEZVOUS_ID")) id += (id.empty() ? "" : "/") + std::string(env("ZB_RENDEZVOUS_ID"));
  l.id = id;
  *out = l;
  return Status::ok();
}

}  // namespace zb
