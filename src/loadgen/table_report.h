// The terminal report: one block per run (throughput, goodput, latency percentiles, what
// failed) and, for sweeps, one line per run so the knee of the curve is visible at a glance.
#pragma once

#include <string>

#include "loadgen/bench_report.h"

namespace rapide::loadgen {

std::string format_tables(const BenchReport& report);

// "TTFT p50 12.3 ms" style milliseconds with a precision that suits the magnitude.
std::string format_ms(double seconds);

}  // namespace rapide::loadgen
