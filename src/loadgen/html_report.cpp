#include "loadgen/html_report.h"

#include <fmt/format.h>

#include <fstream>

#include "base/error.h"
#include "loadgen/svg_chart.h"
#include "loadgen/table_report.h"

namespace rapide::loadgen {

namespace {

constexpr const char* kStyle = R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; }
.fail { color: #b00; }
</style>
)";

std::string ms(double seconds) {
  return format_ms(seconds);
}

std::vector<double> in_ms(const std::vector<double>& seconds) {
  std::vector<double> out;
  out.reserve(seconds.size());
  for (const double s : seconds) out.push_back(s * 1e3);
  return out;
}

std::string summary_table(const BenchReport& report) {
  std::string out =
      "<table><tr><th>run</th><th>requests</th><th>completed</th><th>failed</th>"
      "<th>req/s</th><th>output tok/s</th><th>goodput req/s</th>"
      "<th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p90</th>"
      "<th>TPOT p99</th><th>ITL p50</th><th>ITL p99</th><th>E2E p50</th><th>E2E p99</th></tr>\n";
  for (const RunResult& run : report.runs) {
    const RunSummary& s = run.summary;
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td><td>{:.2f}</td><td>{:.1f}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        xml_escape(run.label), s.requests, s.completed, s.failed ? " class=\"fail\"" : "", s.failed,
        s.request_throughput, s.output_throughput,
        s.slo.empty() ? std::string("-") : fmt::format("{:.2f}", s.goodput), ms(s.ttft.p50),
        ms(s.ttft.p90), ms(s.ttft.p99), ms(s.tpot.p50), ms(s.tpot.p90), ms(s.tpot.p99),
        ms(s.itl.p50), ms(s.itl.p99), ms(s.e2e.p50), ms(s.e2e.p99));
  }
  return out + "</table><p>Latencies in milliseconds.</p>\n";
}

std::string sweep_charts(const BenchReport& report) {
  Series ttft50{"TTFT p50", {}, true}, ttft99{"TTFT p99", {}, true};
  Series tpot50{"TPOT p50", {}, true}, tpot99{"TPOT p99", {}, true};
  Series good{"goodput req/s", {}, true}, offered{"completed req/s", {}, true};
  for (const RunResult& run : report.runs) {
    const RunSummary& s = run.summary;
    const double x = s.output_throughput;
    ttft50.points.emplace_back(x, s.ttft.p50 * 1e3);
    ttft99.points.emplace_back(x, s.ttft.p99 * 1e3);
    tpot50.points.emplace_back(x, s.tpot.p50 * 1e3);
    tpot99.points.emplace_back(x, s.tpot.p99 * 1e3);
    const double offered_rate = run.arrival.open_loop() && std::isfinite(run.arrival.rate)
                                    ? run.arrival.rate
                                    : s.request_throughput;
    offered.points.emplace_back(offered_rate, s.request_throughput);
    if (!s.slo.empty()) good.points.emplace_back(offered_rate, s.goodput);
  }
  std::string out = "<h2>Throughput vs latency across the sweep</h2><div class=\"charts\">\n";
  out += svg_xy({ttft50, ttft99}, {"TTFT vs throughput", "output tokens/s", "ms"});
  out += svg_xy({tpot50, tpot99}, {"TPOT vs throughput", "output tokens/s", "ms"});
  std::vector<Series> rates = {offered};
  if (!good.points.empty()) rates.push_back(good);
  out += svg_xy(rates, {"Completed and good requests", "offered req/s", "req/s"});
  return out + "</div>\n";
}

std::string run_section(const RunResult& run) {
  std::vector<double> ttft, tpot, itl;
  Series ttft_time{"TTFT", {}, false}, tpot_time{"TPOT", {}, false};
  std::string failures;
  for (const RequestRecord& r : run.records) {
    if (!r.ok()) {
      failures += fmt::format("<li>request {}: {} {}</li>\n", r.index, error_kind_name(r.error),
                              xml_escape(r.error_message));
      continue;
    }
    if (r.ttft() >= 0) {
      ttft.push_back(r.ttft());
      ttft_time.points.emplace_back(r.send_time, r.ttft() * 1e3);
    }
    if (r.tpot() >= 0) {
      tpot.push_back(r.tpot());
      tpot_time.points.emplace_back(r.send_time, r.tpot() * 1e3);
    }
    const std::vector<double> gaps = r.inter_token_latencies();
    itl.insert(itl.end(), gaps.begin(), gaps.end());
  }
  const RunSummary& s = run.summary;
  std::string out = fmt::format(
      "<h2>{}</h2><p>{} requests, {} completed, {} failed in {:.2f} s: {:.2f} req/s, "
      "{:.1f} output tok/s",
      xml_escape(run.label), s.requests, s.completed, s.failed, s.duration, s.request_throughput,
      s.output_throughput);
  if (!s.slo.empty()) {
    out += fmt::format("; goodput ({}) {:.2f} req/s ({} requests)", xml_escape(s.slo.to_string()),
                       s.goodput, s.good);
  }
  out += ".</p>\n<div class=\"charts\">\n";
  out += svg_histogram(in_ms(ttft), {"TTFT distribution", "ms", "requests"});
  out += svg_histogram(in_ms(tpot), {"TPOT distribution", "ms", "requests"});
  out += svg_histogram(in_ms(itl), {"Inter-token latency distribution", "ms", "gaps"});
  out += svg_xy({ttft_time}, {"TTFT over time", "send time (s)", "ms"});
  out += svg_xy({tpot_time}, {"TPOT over time", "send time (s)", "ms"});
  out += "</div>\n";
  if (!failures.empty()) {
    // A long failure list says the same thing many times; the first ones are enough.
    out += "<h3 class=\"fail\">Failures</h3><ul>\n" + failures.substr(0, 20000) + "</ul>\n";
  }
  return out;
}

}  // namespace

std::string render_html(const BenchReport& report, const std::string& sections) {
  std::string out = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>rapide bench: " +
                    xml_escape(report.workload) + "</title>\n" + kStyle + "</head><body>\n";
  out += fmt::format("<h1>rapide bench: {} workload</h1>\n<p>Target: {}</p>\n",
                     xml_escape(report.workload), xml_escape(report.backend));
  out += "<table><tr><th>setting</th><th>value</th></tr>\n";
  for (const auto& [key, value] : report.settings) {
    out += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", xml_escape(key), xml_escape(value));
  }
  out += "</table>\n" + sections + summary_table(report);
  if (report.runs.size() > 1) out += sweep_charts(report);
  for (const RunResult& run : report.runs) out += run_section(run);
  return out + "</body></html>\n";
}

void write_html_file(const std::string& path, const BenchReport& report,
                     const std::string& sections) {
  std::ofstream out(path);
  if (!out) fail(ErrorCode::kNotFound, "cannot write '{}'", path);
  out << render_html(report, sections);
  if (!out) fail(ErrorCode::kInternal, "writing '{}' failed", path);
}

}  // namespace rapide::loadgen
