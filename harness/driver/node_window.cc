// Node counters around a benchmark's stretch, fenced on the driver's control plane.
#include "harness/driver/node_window.h"

#include "harness/comm/node_traffic.h"

namespace zb {
namespace {

struct Reading {
  int64_t inter = -1, intra = -1;
};

// `when`: "before the stretch" or "after the stretch", for a timeout's line.
Status fenced_reading(Driver& d, const std::string& when, Reading* out) {
  ZB_RETURN_IF_ERROR(
      d.control().barrier(Wait::fence, "every rank in, to read the node counters " + when));
  if (d.topology().local_rank == 0)
    *out = {read_node_counter(kInterNodeCounterEnv), read_node_counter(kIntraNodeCounterEnv)};
  return d.control().barrier(Wait::fence, "every rank out, the node counters read " + when);
}

// The busiest node's growth of one counter, or NaN when any node lacks it.
double busiest(Driver& d, int64_t before, int64_t after) {
  bool first = d.topology().local_rank == 0;
  double have = !first || (before >= 0 && after >= before) ? 1 : 0;
  double all_have = -d.max_over_ranks(-have);  // the minimum
  double grew = d.max_over_ranks(first && have > 0 ? double(after - before) : 0);
  return all_have > 0 ? grew : NAN;
}

}  // namespace

Status measure_node_window(Driver& d, const std::function<Status()>& body, NodeWindow* out) {
  // Declared nodes are not the machine's: its counters would not say what crossed them.
  const bool real = !d.topology().declared;
  Reading before, after;
  if (real) ZB_RETURN_IF_ERROR(fenced_reading(d, "before the stretch", &before));
  ZB_RETURN_IF_ERROR(body());
  if (real) ZB_RETURN_IF_ERROR(fenced_reading(d, "after the stretch", &after));
  *out = NodeWindow();
  if (!real) return Status::ok();
  out->inter = busiest(d, before.inter, after.inter);
  out->intra = busiest(d, before.intra, after.intra);
  return Status::ok();
}

}  // namespace zb
