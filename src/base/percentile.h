// Percentiles and medians: the one definition every report uses (the server's and the
// benchmarks' latency figures, `rapide bench`, bench/ scripts), so two reports of the same
// samples never disagree on what "p99" means.
//
// Linear interpolation between the closest ranks (numpy's default, "type 7"): the p-th
// percentile of n sorted values sits at rank p/100 * (n - 1). Empty input gives 0.
#pragma once

#include <span>
#include <vector>

namespace rapide {

// `sorted` ascending; p in [0, 100] (clamped).
double percentile_of_sorted(std::span<const double> sorted, double p);
// Sorts a copy.
double percentile(std::vector<double> values, double p);
inline double median(std::vector<double> values) {
  return percentile(std::move(values), 50.0);
}

}  // namespace rapide
