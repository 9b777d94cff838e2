// The thread pool the Google Benchmark micro-benchmarks run on.
#pragma once

#include <cstdlib>

#include "base/cpu_features.h"
#include "base/thread_pool.h"

namespace rapide {

// RAPIDE_BENCH_THREADS overrides the physical core count (1 isolates kernel speed from
// scheduling noise on a shared machine).
inline ThreadPool& bench_pool() {
  static ThreadPool p([] {
    const char* env = std::getenv("RAPIDE_BENCH_THREADS");
    return env ? std::atoi(env) : physical_core_count();
  }());
  return p;
}

}  // namespace rapide
