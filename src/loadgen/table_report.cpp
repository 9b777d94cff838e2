#include "loadgen/table_report.h"

#include <fmt/format.h>

#include <map>

namespace rapide::loadgen {

namespace {

void distribution_row(std::string& out, const char* name, const Distribution& d) {
  if (d.count == 0) {
    out += fmt::format("  {:<5} {:>9}\n", name, "-");
    return;
  }
  out += fmt::format("  {:<5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n", name, format_ms(d.mean),
                     format_ms(d.p50), format_ms(d.p90), format_ms(d.p95), format_ms(d.p99),
                     format_ms(d.max), d.count);
}

void run_block(std::string& out, const RunResult& run) {
  const RunSummary& s = run.summary;
  out += fmt::format("== {} ==  {} requests: {} completed, {} failed; {:.2f} s\n", run.label,
                     s.requests, s.completed, s.failed, s.duration);
  out += fmt::format(
      "  throughput: {:.2f} req/s, {:.1f} output tok/s, {:.1f} total tok/s "
      "({} prompt + {} output tokens)\n",
      s.request_throughput, s.output_throughput, s.total_token_throughput, s.prompt_tokens,
      s.output_tokens);
  if (!s.slo.empty()) {
    out += fmt::format("  goodput ({}): {:.2f} req/s, {} of {} completed requests ({:.1f} %)\n",
                       s.slo.to_string(), s.goodput, s.good, s.completed,
                       s.completed ? 100.0 * static_cast<double>(s.good) / s.completed : 0.0);
  }
  out += fmt::format("  {:<5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "ms", "mean", "p50",
                     "p90", "p95", "p99", "max", "n");
  distribution_row(out, "TTFT", s.ttft);
  distribution_row(out, "TPOT", s.tpot);
  distribution_row(out, "ITL", s.itl);
  distribution_row(out, "E2E", s.e2e);
  if (s.failed == 0) return;
  // Each kind of failure once, with its first message and how often it happened.
  std::map<std::string, std::pair<size_t, std::string>> seen;
  for (const RequestRecord& r : run.records) {
    if (r.ok()) continue;
    auto& entry = seen[error_kind_name(r.error)];
    if (entry.first++ == 0) entry.second = r.error_message;
  }
  out += "  failures:\n";
  for (const auto& [kind, entry] : seen) {
    out += fmt::format("    {:>5} x {:<13} e.g. {}\n", entry.first, kind, entry.second);
  }
}

}  // namespace

std::string format_ms(double seconds) {
  const double ms = seconds * 1e3;
  if (ms >= 1000) return fmt::format("{:.0f}", ms);
  if (ms >= 100) return fmt::format("{:.1f}", ms);
  return fmt::format("{:.2f}", ms);
}

std::string format_tables(const BenchReport& report) {
  std::string out =
      fmt::format("rapide bench: {} workload -> {}\n", report.workload, report.backend);
  for (const RunResult& run : report.runs) run_block(out, run);
  if (report.runs.size() < 2) return out;
  out +=
      fmt::format("\n{:<24} {:>8} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}\n", "sweep", "req/s",
                  "out tok/s", "goodput", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "failed");
  for (const RunResult& run : report.runs) {
    const RunSummary& s = run.summary;
    out += fmt::format("{:<24} {:>8.2f} {:>10.1f} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6}\n", run.label,
                       s.request_throughput, s.output_throughput,
                       s.slo.empty() ? std::string("-") : fmt::format("{:.2f}", s.goodput),
                       format_ms(s.ttft.p50), format_ms(s.ttft.p99), format_ms(s.tpot.p50),
                       format_ms(s.tpot.p99), s.failed);
  }
  return out;
}

}  // namespace rapide::loadgen
