// `rapide bench compare A.json B.json`: the same figures side by side with B/A ratios, run by
// run, so the effect of one switch (prefix cache, batching mode, quantization) reads directly.
#pragma once

#include <string>

#include "loadgen/bench_report.h"

namespace rapide::loadgen {

// Runs are paired by position (a sweep against the same sweep); extra runs are listed as
// unmatched. "better" names the side with the better value (lower latency, higher rate).
std::string format_compare(const BenchReport& a, const std::string& a_name, const BenchReport& b,
                           const std::string& b_name);

}  // namespace rapide::loadgen
