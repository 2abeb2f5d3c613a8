// The CPU busy-wait.
#include <chrono>

#include "kernels/spin.h"

namespace zb {

void spin_cpu(double seconds) {
  if (!(seconds > 0)) return;
  using Clock = std::chrono::steady_clock;
  // Rounded up, so the wait is never shorter than asked.
  const auto wait = std::chrono::ceil<Clock::duration>(std::chrono::duration<double>(seconds));
  const Clock::time_point end = Clock::now() + wait;
  // Reading the clock is itself the work: about 20 ns a call through the vDSO, so the wait
  // overshoots by that much at most, and the core stays busy throughout.
  while (Clock::now() < end) {
  }
}

}  // namespace zb
