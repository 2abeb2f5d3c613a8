// The node counters read around a stretch of a benchmark: what each node sent to other nodes
// (and between its own ranks) meanwhile, measured by the node's network devices rather than
// by our arithmetic.
#pragma once

#include <cmath>
#include <functional>

#include "harness/driver/driver.h"

namespace zb {

// Bytes the busiest node sent during the window; NaN where no counter names them (no launcher
// set one, a node could not read it, or the nodes are declared rather than real).
struct NodeWindow {
  double inter = NAN, intra = NAN;
};

// Runs `body` between two fences on the driver's control plane. At each fence every rank
// arrives, then each node's first rank reads the node's counters, then every rank arrives
// again, so no rank sends before the first reading or after the second; the counters then
// hold what `body` sent plus the fences' own few hundred bytes.
Status measure_node_window(Driver& driver, const std::function<Status()>& body, NodeWindow* out);

}  // namespace zb
