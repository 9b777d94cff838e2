#include "serve/latency_window.h"

#include <algorithm>
#include <chrono>

#include "base/percentile.h"

namespace rapide::serve {

LatencyWindow::LatencyWindow(size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

void LatencyWindow::add(TimePoint time, double seconds) {
  ring_[next_] = Sample{time, seconds};
  next_ = (next_ + 1) % ring_.size();
  if (size_ < ring_.size()) size_++;
}

std::optional<LatencyPercentiles> LatencyWindow::percentiles(TimePoint now,
                                                             double window_seconds) const {
  const TimePoint since = now - std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(window_seconds));
  std::vector<double> values;
  for (size_t i = 0; i < size_; ++i) {
    const Sample& s = ring_[i];
    if (s.time > since && s.time <= now) values.push_back(s.seconds);
  }
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  LatencyPercentiles p;
  p.count = values.size();
  p.p50 = percentile_of_sorted(values, 50.0);
  p.p90 = percentile_of_sorted(values, 90.0);
  p.p99 = percentile_of_sorted(values, 99.0);
  return p;
}

}  // namespace rapide::serve
