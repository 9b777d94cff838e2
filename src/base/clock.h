// Monotonic time helpers used for TTFT/TPOT accounting.
#pragma once

#include <chrono>

namespace rapide {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

inline double seconds_between(TimePoint a, TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace rapide
