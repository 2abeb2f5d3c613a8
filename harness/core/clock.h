// Clock: the one time base of timers, traces and timeouts (the steady clock, in seconds).
#pragma once

#include <chrono>

namespace zb {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace zb
