// The overlap of communication with compute, as IMB-NBC defines it.
#pragma once

#include <algorithm>

namespace zb {

// overlap_eff = (comm - exposed) / min(comm, compute), clipped to [0, 1]: the share of the
// shorter side that ran concurrently with the other (1: fully hidden, 0: serial). It is
// IMB-NBC's (comm + compute - step) / min(comm, compute) with the step written as compute
// plus the exposed communication, which is measured directly rather than as a difference of
// two long step times.
inline double overlap_efficiency(double exposed_s, double comm_s, double compute_s) {
  double shorter = std::min(comm_s, compute_s);
  if (!(shorter > 0)) return 0;
  return std::clamp((comm_s - exposed_s) / shorter, 0.0, 1.0);
}

}  // namespace zb
