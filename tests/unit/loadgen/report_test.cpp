// Reports: JSON keeps every timestamp (a round trip gives the same summary), the terminal
// table and the compare view show the figures, the HTML needs no network.
#include <gtest/gtest.h>

#include "base/error.h"
#include "loadgen/bench_report.h"
#include "loadgen/compare.h"
#include "loadgen/html_report.h"
#include "loadgen/table_report.h"

namespace rapide::loadgen {
namespace {

RequestRecord record(uint64_t index, double send, double first, double gap, int tokens) {
  RequestRecord r;
  r.index = index;
  r.send_time = send;
  for (int i = 0; i < tokens; ++i) r.token_times.push_back(first + gap * i);
  r.end_time = first + gap * (tokens - 1);
  r.output_tokens = tokens;
  r.prompt_tokens = 20;
  r.expected_output_tokens = tokens;
  r.usage_reported = true;
  return r;
}

BenchReport sample_report(double scale) {
  BenchReport report;
  report.backend = "http://127.0.0.1:1/v1/completions (model 'm')";
  report.workload = "shared-prefix";
  report.settings = {{"workload", "shared-prefix"}, {"flags", "rates=\"1,2\""}};
  report.slo = parse_slo("ttft=500ms,tpot=50ms");
  for (int run_index = 0; run_index < 2; ++run_index) {
    RunResult run;
    run.arrival = {0, run_index == 0 ? 1.0 : INFINITY, 1.0, 3};
    run.label = run.arrival.label();
    for (uint64_t i = 0; i < 5; ++i) {
      run.records.push_back(record(i, 0.25 * i, 0.125 * scale * (i + 1), 0.015625 * scale, 8));
    }
    RequestRecord failed;
    failed.index = 5;
    failed.error = ErrorKind::kHttpStatus;
    failed.http_status = 503;
    failed.error_message = "HTTP 503: draining";
    run.records.push_back(failed);
    run.summary = summarize(run.records, report.slo);
    report.runs.push_back(std::move(run));
  }
  return report;
}

TEST(BenchReport, JsonRoundTripKeepsRecordsAndSummary) {
  const BenchReport report = sample_report(1.0);
  const std::string path = ::testing::TempDir() + "/bench_result.json";
  write_report_file(path, report);
  const BenchReport back = read_report_file(path);
  ASSERT_EQ(back.runs.size(), 2u);
  EXPECT_EQ(back.workload, "shared-prefix");
  EXPECT_EQ(back.slo.ttft, 0.5);
  EXPECT_TRUE(std::isinf(back.runs[1].arrival.rate));
  EXPECT_EQ(back.runs[0].arrival.rate, 1.0);
  EXPECT_EQ(back.settings, report.settings);
  for (size_t i = 0; i < 2; ++i) {
    const RunResult& a = report.runs[i];
    const RunResult& b = back.runs[i];
    ASSERT_EQ(a.records.size(), b.records.size());
    for (size_t j = 0; j < a.records.size(); ++j) {
      EXPECT_EQ(a.records[j].token_times, b.records[j].token_times);
      EXPECT_EQ(a.records[j].end_time, b.records[j].end_time);
      EXPECT_EQ(a.records[j].error, b.records[j].error);
      EXPECT_EQ(a.records[j].error_message, b.records[j].error_message);
    }
    EXPECT_EQ(summary_to_json(a.summary), summary_to_json(b.summary));
  }
  const nlohmann::json j = report_to_json(report);
  EXPECT_EQ(j["runs"][0]["requests"][0]["ttft"], 0.125);
  EXPECT_EQ(j["runs"][0]["summary"]["failures"]["http_status"], 1);
  EXPECT_THROW(report_from_json(nlohmann::json{{"format", "other"}}), Error);
}

TEST(BenchReport, TerminalTableShowsFiguresAndFailures) {
  const std::string text = format_tables(sample_report(1.0));
  EXPECT_NE(text.find("== rate=1/s =="), std::string::npos) << text;
  EXPECT_NE(text.find("5 completed, 1 failed"), std::string::npos) << text;
  EXPECT_NE(text.find("goodput (ttft=500ms,tpot=50ms)"), std::string::npos) << text;
  EXPECT_NE(text.find("http_status"), std::string::npos) << text;
  EXPECT_NE(text.find("HTTP 503: draining"), std::string::npos) << text;
  EXPECT_NE(text.find("sweep"), std::string::npos) << text;
  // TTFT p50 of 125, 250, 375, 500, 625 ms.
  EXPECT_NE(text.find("375.0"), std::string::npos) << text;
}

TEST(BenchReport, CompareShowsRatios) {
  const std::string text =
      format_compare(sample_report(1.0), "a.json", sample_report(2.0), "b.json");
  EXPECT_NE(text.find("TTFT p50"), std::string::npos) << text;
  EXPECT_NE(text.find("2.000x"), std::string::npos) << text;  // B's latencies doubled
  EXPECT_NE(text.find("1.000x"), std::string::npos) << text;  // same counts
}

TEST(BenchReport, HtmlIsSelfContained) {
  const std::string html = render_html(sample_report(1.0));
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("TTFT distribution"), std::string::npos);
  EXPECT_NE(html.find("TPOT over time"), std::string::npos);
  EXPECT_NE(html.find("TTFT vs throughput"), std::string::npos);
  EXPECT_NE(html.find("HTTP 503: draining"), std::string::npos);
  // Nothing to fetch: no scripts, stylesheets or images from elsewhere.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  size_t pos = 0;
  while ((pos = html.find("http", pos)) != std::string::npos) {
    const bool svg_namespace = html.compare(pos, 26, "http://www.w3.org/2000/svg") == 0;
    const bool target_text = html.compare(pos, 16, "http://127.0.0.1") == 0;
    EXPECT_TRUE(svg_namespace || target_text || html.compare(pos, 11, "http_status") == 0)
        << html.substr(pos, 40);
    ++pos;
  }
}

}  // namespace
}  // namespace rapide::loadgen
