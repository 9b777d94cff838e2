// A self-contained HTML report: tables plus inline-SVG charts (latency distributions,
// throughput against latency across a sweep, TTFT and TPOT over time). No scripts or
// external resources, so it opens offline and can be attached to an issue.
#pragma once

#include <string>

#include "loadgen/bench_report.h"

namespace rapide::loadgen {

// `sections`: more HTML placed after the settings (the advisor's findings, advise/advice_html.h).
std::string render_html(const BenchReport& report, const std::string& sections = {});
void write_html_file(const std::string& path, const BenchReport& report,
                     const std::string& sections = {});

}  // namespace rapide::loadgen
