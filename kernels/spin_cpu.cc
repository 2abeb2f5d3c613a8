// The CPU busy-wait.
#include "kernels/spin.h"

namespace zb {

void spin_cpu(double seconds) { spin_on<std::chrono::steady_clock>(seconds); }

}  // namespace zb
