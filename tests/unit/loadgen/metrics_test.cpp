// The metric code on injected timestamps: every figure is checked exactly, with binary
// fractions of a second so no rounding hides behind a tolerance.
#include <gtest/gtest.h>

#include "base/error.h"
#include "base/percentile.h"
#include "loadgen/metrics.h"
#include "loadgen/slo.h"

namespace rapide::loadgen {
namespace {

// First token at `first`, then one every `gap`, the response ending `tail` after the last.
RequestRecord streamed(double send, double first, double gap, int tokens, double tail = 0) {
  RequestRecord r;
  r.send_time = send;
  for (int i = 0; i < tokens; ++i) r.token_times.push_back(first + gap * i);
  r.end_time = first + gap * (tokens - 1) + tail;
  r.output_tokens = tokens;
  r.prompt_tokens = 10;
  return r;
}

TEST(BenchMetrics, PerRequestTtftTpotItlE2e) {
  const RequestRecord r = streamed(0, 0.125, 0.015625, 5, 0.0078125);
  EXPECT_EQ(r.ttft(), 0.125);
  EXPECT_EQ(r.e2e(), 0.125 + 4 * 0.015625 + 0.0078125);
  // TPOT = (end - first token) / (output tokens - 1).
  EXPECT_EQ(r.tpot(), (4 * 0.015625 + 0.0078125) / 4);
  const std::vector<double> itl = r.inter_token_latencies();
  ASSERT_EQ(itl.size(), 4u);
  for (const double gap : itl) EXPECT_EQ(gap, 0.015625);
}

TEST(BenchMetrics, TpotUsesReportedTokenCountNotChunks) {
  // Two chunks carrying four tokens (a server that merges tokens): TPOT divides by 3.
  RequestRecord r = streamed(0, 0.25, 0.5, 2);
  r.output_tokens = 4;
  EXPECT_EQ(r.tpot(), 0.5 / 3);
  RequestRecord single = streamed(0, 0.25, 0, 1);
  EXPECT_LT(single.tpot(), 0);  // undefined for one token
  RequestRecord none;
  EXPECT_LT(none.ttft(), 0);
}

TEST(BenchMetrics, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v;
  for (int i = 1; i <= 10; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 9.91);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({3.0}, 99), 3.0);
  EXPECT_DOUBLE_EQ(percentile({10, 1, 7, 4}, 50), 5.5);  // unsorted input is sorted first
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);

  const Distribution d = describe({4, 1, 3, 2});  // unsorted input
  EXPECT_EQ(d.count, 4u);
  EXPECT_EQ(d.mean, 2.5);
  EXPECT_EQ(d.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.p90, 3.7);
  EXPECT_DOUBLE_EQ(d.p95, 3.85);
  EXPECT_DOUBLE_EQ(d.p99, 3.97);
  EXPECT_EQ(d.max, 4);
}

TEST(BenchMetrics, SummaryThroughputAndFailures) {
  std::vector<RequestRecord> records = {
      streamed(0.0, 0.125, 0.0625, 9),  // ends at 0.625
      streamed(0.5, 0.25, 0.125, 5),    // ends at 0.5 + 0.75 = 1.25
      streamed(1.0, 0.5, 0.25, 3),      // ends at 1.0 + 1.0 = 2.0
  };
  RequestRecord failed;
  failed.send_time = 0.25;
  failed.end_time = 0.0078125;
  failed.error = ErrorKind::kConnect;
  failed.error_message = "refused";
  records.push_back(failed);

  const RunSummary s = summarize(records, Slo{});
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.completed, 3u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.failures.at("connect"), 1u);
  EXPECT_EQ(s.duration, 2.0);
  EXPECT_EQ(s.output_tokens, 17);
  EXPECT_EQ(s.prompt_tokens, 30);
  EXPECT_EQ(s.request_throughput, 1.5);
  EXPECT_EQ(s.output_throughput, 8.5);
  EXPECT_EQ(s.total_token_throughput, 23.5);
  EXPECT_EQ(s.ttft.count, 3u);
  EXPECT_EQ(s.ttft.p50, 0.25);
  EXPECT_EQ(s.ttft.max, 0.5);
  EXPECT_EQ(s.tpot.p50, 0.125);  // TPOTs 0.0625, 0.125, 0.25
  EXPECT_EQ(s.itl.count, 8u + 4u + 2u);
  EXPECT_EQ(s.itl.max, 0.25);
  EXPECT_EQ(s.e2e.max, 1.0);
  EXPECT_EQ(s.good, 3u);  // no SLO: every completed request counts
}

TEST(BenchMetrics, GoodputCountsOnlyRequestsWithinEverySlo) {
  const std::vector<RequestRecord> records = {
      streamed(0.0, 0.125, 0.03125, 9),  // TTFT 125 ms, TPOT 31.25 ms: good
      streamed(0.0, 0.75, 0.03125, 9),   // TTFT too slow
      streamed(0.0, 0.125, 0.0625, 9),   // TPOT too slow
      streamed(0.0, 0.25, 0.0, 1),       // one token: no TPOT, TTFT fine: good
  };
  const Slo slo = parse_slo("ttft=500ms,tpot=50ms");
  const RunSummary s = summarize(records, slo);
  EXPECT_EQ(s.good, 2u);
  EXPECT_EQ(s.duration, 0.75 + 8 * 0.03125);
  EXPECT_EQ(s.goodput, 2 / (0.75 + 8 * 0.03125));
  EXPECT_TRUE(meets_slo(records[0], slo));
  EXPECT_FALSE(meets_slo(records[1], slo));
  EXPECT_FALSE(meets_slo(records[2], slo));
  EXPECT_TRUE(meets_slo(records[3], slo));
  EXPECT_FALSE(meets_slo(records[0], parse_slo("e2e=300ms")));
  RequestRecord failed = records[0];
  failed.error = ErrorKind::kIo;
  EXPECT_FALSE(meets_slo(failed, slo));
}

TEST(BenchMetrics, SloParsing) {
  const Slo slo = parse_slo("ttft=0.5s,tpot=50,e2e=2500us");
  EXPECT_EQ(slo.ttft, 0.5);
  EXPECT_EQ(slo.tpot, 0.05);
  EXPECT_EQ(slo.e2e, 0.0025);
  EXPECT_EQ(parse_slo("ttft=500ms").to_string(), "ttft=500ms");
  EXPECT_TRUE(parse_slo("").empty());
  EXPECT_THROW(parse_slo("ttft"), Error);
  EXPECT_THROW(parse_slo("latency=5ms"), Error);
  EXPECT_THROW(parse_slo("ttft=5min"), Error);
  EXPECT_THROW(parse_slo("ttft=fast"), Error);
}

}  // namespace
}  // namespace rapide::loadgen
