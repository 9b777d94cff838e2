// A whole `rapide bench` invocation: what was run (config) and each run of a sweep, with its
// raw records and summary. The JSON form keeps every per-request timestamp, so summaries can
// be recomputed (and compared) later without rerunning anything.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "loadgen/runner.h"
#include "loadgen/slo.h"

namespace rapide::loadgen {

struct BenchReport {
  std::string backend;                                        // Backend::describe()
  std::string workload;                                       // workload kind name
  std::vector<std::pair<std::string, std::string>> settings;  // flags worth showing, in order
  Slo slo;
  std::vector<RunResult> runs;
};

nlohmann::json summary_to_json(const RunSummary& summary);
nlohmann::json report_to_json(const BenchReport& report);
// Reads what report_to_json wrote; summaries are recomputed from the records.
// Throws Error(kCorrupt) for JSON that is not a bench report.
BenchReport report_from_json(const nlohmann::json& j);

void write_report_file(const std::string& path, const BenchReport& report);
BenchReport read_report_file(const std::string& path);

}  // namespace rapide::loadgen
