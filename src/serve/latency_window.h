// The latest latency observations of one kind (TTFT, TPOT or inter-token), with their times,
// for figures "over the last few seconds": the dashboard's percentile charts. A fixed ring
// (the newest `capacity` samples), so recording stays O(1) on the token path and memory
// stays bounded under any load; the Prometheus histograms keep the whole-run view.
//
// Not thread-safe: ServeMetrics holds it under its mutex.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "base/clock.h"

namespace rapide::serve {

struct LatencyPercentiles {
  size_t count = 0;                        // samples in the window
  double p50 = 0.0, p90 = 0.0, p99 = 0.0;  // seconds
};

class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 4096);
  void add(TimePoint time, double seconds);
  // Percentiles of the samples taken in (now - window, now]; nullopt when there are none.
  std::optional<LatencyPercentiles> percentiles(TimePoint now, double window_seconds) const;

 private:
  struct Sample {
    TimePoint time;
    double seconds = 0.0;
  };
  std::vector<Sample> ring_;
  size_t next_ = 0;  // where the next sample goes
  size_t size_ = 0;
};

}  // namespace rapide::serve
