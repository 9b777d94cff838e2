// Monotonic time helpers used for TTFT/TPOT accounting.
#pragma once

#include <chrono>
#include <ctime>

namespace rapide {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

inline double seconds_between(TimePoint a, TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds of this process (all threads): on a shared machine, cores actually received =
// CPU seconds / wall seconds, and work per CPU-second is a figure other load disturbs less.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace rapide
