#include "loadgen/compare.h"

#include <fmt/format.h>

#include <algorithm>

#include "loadgen/table_report.h"

namespace rapide::loadgen {

namespace {

enum class Unit { kCount, kRate, kMs };

struct Row {
  const char* name;
  double a;
  double b;
  bool higher_is_better;
  Unit unit;
};

std::vector<Row> rows_for(const RunSummary& a, const RunSummary& b) {
  const auto n = [](size_t v) { return static_cast<double>(v); };
  std::vector<Row> rows = {
      {"completed", n(a.completed), n(b.completed), true, Unit::kCount},
      {"failed", n(a.failed), n(b.failed), false, Unit::kCount},
      {"req/s", a.request_throughput, b.request_throughput, true, Unit::kRate},
      {"output tok/s", a.output_throughput, b.output_throughput, true, Unit::kRate},
      {"TTFT mean", a.ttft.mean, b.ttft.mean, false, Unit::kMs},
      {"TTFT p50", a.ttft.p50, b.ttft.p50, false, Unit::kMs},
      {"TTFT p90", a.ttft.p90, b.ttft.p90, false, Unit::kMs},
      {"TTFT p99", a.ttft.p99, b.ttft.p99, false, Unit::kMs},
      {"TPOT mean", a.tpot.mean, b.tpot.mean, false, Unit::kMs},
      {"TPOT p50", a.tpot.p50, b.tpot.p50, false, Unit::kMs},
      {"TPOT p90", a.tpot.p90, b.tpot.p90, false, Unit::kMs},
      {"TPOT p99", a.tpot.p99, b.tpot.p99, false, Unit::kMs},
      {"ITL p50", a.itl.p50, b.itl.p50, false, Unit::kMs},
      {"ITL p99", a.itl.p99, b.itl.p99, false, Unit::kMs},
      {"E2E p50", a.e2e.p50, b.e2e.p50, false, Unit::kMs},
      {"E2E p99", a.e2e.p99, b.e2e.p99, false, Unit::kMs},
  };
  if (!a.slo.empty() || !b.slo.empty()) {
    rows.push_back({"goodput req/s", a.goodput, b.goodput, true, Unit::kRate});
  }
  return rows;
}

std::string value(const Row& row, double v) {
  switch (row.unit) {
    case Unit::kMs:
      return format_ms(v) + " ms";
    case Unit::kCount:
      return fmt::format("{:.0f}", v);
    case Unit::kRate:
      return fmt::format("{:.2f}", v);
  }
  return {};
}

}  // namespace

std::string format_compare(const BenchReport& a, const std::string& a_name, const BenchReport& b,
                           const std::string& b_name) {
  std::string out = fmt::format("A: {}  ({} workload, {})\nB: {}  ({} workload, {})\n", a_name,
                                a.workload, a.backend, b_name, b.workload, b.backend);
  const size_t paired = std::min(a.runs.size(), b.runs.size());
  for (size_t i = 0; i < paired; ++i) {
    const RunResult& ra = a.runs[i];
    const RunResult& rb = b.runs[i];
    out += fmt::format("\n== A {} | B {} ==\n", ra.label, rb.label);
    out += fmt::format("  {:<14} {:>14} {:>14} {:>9} {:>7}\n", "", "A", "B", "B/A", "better");
    for (const Row& row : rows_for(ra.summary, rb.summary)) {
      const std::string ratio = row.a != 0 ? fmt::format("{:.3f}x", row.b / row.a) : "-";
      const char* better = row.a == row.b                            ? "="
                           : (row.b > row.a) == row.higher_is_better ? "B"
                                                                     : "A";
      out += fmt::format("  {:<14} {:>14} {:>14} {:>9} {:>7}\n", row.name, value(row, row.a),
                         value(row, row.b), ratio, better);
    }
  }
  for (size_t i = paired; i < a.runs.size(); ++i) {
    out += fmt::format("\nonly in A: {}\n", a.runs[i].label);
  }
  for (size_t i = paired; i < b.runs.size(); ++i) {
    out += fmt::format("\nonly in B: {}\n", b.runs[i].label);
  }
  return out;
}

}  // namespace rapide::loadgen
