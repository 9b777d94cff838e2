// The HTTP client and runner against a fake streaming server with known injected delays:
// timings land where the delays put them, and every kind of failure is recorded per request
// while the run completes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "fake_server.h"
#include "loadgen/http_backend.h"
#include "loadgen/runner.h"

namespace rapide::loadgen {
namespace {

using namespace std::chrono_literals;
using testing::FakeConnection;
using testing::FakeServer;
using testing::stream_tokens;

// Scheduling jitter on a loaded 2-core machine: sleeps never end early, but may end late.
constexpr double kLate = 0.060;

std::vector<Conversation> simple_workload(size_t n, int output_tokens) {
  std::vector<Conversation> w(n);
  for (size_t i = 0; i < n; ++i)
    w[i].turns.push_back({"prompt " + std::to_string(i), output_tokens});
  return w;
}

RunResult run_against(const std::string& url, const std::vector<Conversation>& workload,
                      ArrivalPattern arrival, Slo slo = {},
                      std::chrono::milliseconds timeout = 10s) {
  boost::asio::io_context io;
  HttpBackendOptions options;
  options.target = parse_url(url);
  options.model = "fake";
  options.timeout = timeout;
  HttpBackend backend(io, options);
  RunnerOptions runner;
  runner.arrival = arrival;
  runner.slo = slo;
  return run_benchmark(io, backend, workload, runner);
}

TEST(BenchHttp, TimingsMatchInjectedDelays) {
  FakeServer server(
      [](FakeConnection& c, const std::string&) { stream_tokens(c, 100ms, 20ms, 10); });
  const RunResult run = run_against(server.url(), simple_workload(4, 10), {2, 0, 1, 0});
  ASSERT_EQ(run.records.size(), 4u);
  for (const RequestRecord& r : run.records) {
    ASSERT_TRUE(r.ok()) << r.error_message;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.prompt_tokens, 7);
    EXPECT_EQ(r.output_tokens, 10);
    ASSERT_EQ(r.token_times.size(), 10u);
    EXPECT_GE(r.ttft(), 0.100);
    EXPECT_LT(r.ttft(), 0.100 + kLate);
    // A chunk read late shortens the gap after it, so single gaps get a two-sided bound;
    // the exact arithmetic is checked on injected timestamps in metrics_test.cpp.
    for (const double gap : r.inter_token_latencies()) {
      EXPECT_GT(gap, 0.020 - kLate / 3);
      EXPECT_LT(gap, 0.020 + kLate);
    }
    EXPECT_NEAR(r.tpot(), 0.020, kLate / 3);
    EXPECT_GE(r.e2e(), 0.100 + 9 * 0.020);
  }
  EXPECT_EQ(run.summary.completed, 4u);
  EXPECT_EQ(run.summary.itl.count, 36u);
  EXPECT_NEAR(run.summary.ttft.p50, 0.100, kLate);
  EXPECT_NEAR(run.summary.tpot.p50, 0.020, kLate / 3);
  // Closed loop, 2 users, 4 requests of ~0.28 s: two rounds.
  EXPECT_GE(run.summary.duration, 2 * (0.100 + 9 * 0.020));

  // What a server is asked for: a stream, usage in it, and the forced length.
  const nlohmann::json body = nlohmann::json::parse(server.bodies().at(0));
  EXPECT_EQ(body["model"], "fake");
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["max_tokens"], 10);
  EXPECT_EQ(body["min_tokens"], 10);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_TRUE(body["prompt"].get<std::string>().rfind("prompt ", 0) == 0);
}

TEST(BenchHttp, CountsChunksWithoutUsageAndAcceptsMissingDone) {
  FakeServer server([](FakeConnection& c, const std::string&) {
    c.start_stream();
    for (int i = 0; i < 3; ++i)
      c.chunk("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n");
    c.end_stream();
  });
  const RunResult run = run_against(server.url(), simple_workload(1, 3), {1, 0, 1, 0});
  const RequestRecord& r = run.records.at(0);
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_FALSE(r.usage_reported);
  EXPECT_EQ(r.output_tokens, 3);
}

TEST(BenchHttp, EveryFailureIsRecordedAndTheRunCompletes) {
  std::atomic<int> n{0};
  FakeServer server([&n](FakeConnection& c, const std::string&) {
    switch (n++) {
      case 0:
        c.respond(500, "application/json",
                  R"({"error":{"message":"engine exploded","type":"server_error"}})");
        break;
      case 1:  // ignores "stream": true
        c.respond(200, "application/json", R"({"choices":[{"text":"all at once"}]})");
        break;
      case 2:
        c.start_stream();
        c.chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {broken json\n\n");
        c.end_stream();
        break;
      case 3:
        c.start_stream();
        c.chunk("data: {\"error\":{\"message\":\"prompt too long\"}}\n\n");
        c.end_stream();
        break;
      case 4:  // hangs up mid-stream, inside an unfinished chunked body
        c.start_stream();
        c.chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
        break;
      case 5:
        c.start_stream();
        c.chunk("data: [DONE]\n\n");
        c.end_stream();
        break;
      case 6:  // a 64 KiB trailer field: Beast threw std::length_error out of the whole run
        c.start_stream();
        c.chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
        c.send("0\r\nX-Big: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
        break;
      case 7: {  // 4 MiB of one SSE line: the client buffered it all, for as long as it came
        c.start_stream();
        c.chunk("data: {\"choices\":[{\"text\":\"");
        const std::string piece(64 * 1024, 'b');
        for (int i = 0; i < 64; ++i) c.chunk(piece);
        c.end_stream();
        break;
      }
      default:
        stream_tokens(c, 1ms, 1ms, 2);
    }
  });
  const RunResult run = run_against(server.url(), simple_workload(9, 2), {1, 0, 1, 0});
  ASSERT_EQ(run.records.size(), 9u);
  const std::vector<ErrorKind> expected = {
      ErrorKind::kHttpStatus,  ErrorKind::kNotStreaming, ErrorKind::kMalformed,
      ErrorKind::kServerError, ErrorKind::kIo,           ErrorKind::kEmpty,
      ErrorKind::kIo,          ErrorKind::kMalformed,    ErrorKind::kNone};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(run.records[i].error, expected[i])
        << i << ": " << error_kind_name(run.records[i].error) << " "
        << run.records[i].error_message;
  }
  EXPECT_EQ(run.records[0].http_status, 500);
  EXPECT_NE(run.records[0].error_message.find("engine exploded"), std::string::npos);
  EXPECT_NE(run.records[3].error_message.find("prompt too long"), std::string::npos);
  EXPECT_NE(run.records[7].error_message.find("longer than"), std::string::npos);
  EXPECT_EQ(run.summary.failed, 8u);
  EXPECT_EQ(run.summary.completed, 1u);
  EXPECT_EQ(run.summary.failures.at("http_status"), 1u);
}

TEST(BenchHttp, UnreachableServerAndTimeout) {
  // A port that was bound and released: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const RunResult refused = run_against(url, simple_workload(3, 2), {0, INFINITY, 1, 0});
  EXPECT_EQ(refused.summary.failed, 3u);
  EXPECT_EQ(refused.summary.failures.at("connect"), 3u);
  EXPECT_EQ(http_get(parse_url(url), "/v1/models", "", 500ms), std::nullopt);

  FakeServer slow([](FakeConnection& c, const std::string&) { stream_tokens(c, 1500ms, 1ms, 1); });
  const RunResult timed_out =
      run_against(slow.url(), simple_workload(1, 1), {1, 0, 1, 0}, {}, 200ms);
  EXPECT_EQ(timed_out.records.at(0).error, ErrorKind::kTimeout);
  EXPECT_GE(timed_out.records.at(0).e2e(), 0.2);
  EXPECT_LT(timed_out.records.at(0).e2e(), 0.2 + kLate * 5);
}

TEST(BenchHttp, OpenLoopFollowsArrivalsAndCapsConcurrency) {
  std::atomic<int> active{0}, peak{0};
  FakeServer server([&](FakeConnection& c, const std::string&) {
    const int now = ++active;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    stream_tokens(c, 30ms, 5ms, 3);
    --active;
  });
  const ArrivalPattern pattern{0, 20.0, 1.0, 7};
  const RunResult run = run_against(server.url(), simple_workload(8, 3), pattern);
  const std::vector<double> offsets = arrival_offsets(pattern, 8);
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(run.records[i].ok()) << run.records[i].error_message;
    EXPECT_GE(run.records[i].send_time, offsets[i]);
    // Sending late is scheduling noise on a loaded machine; sending early is the bug to catch.
    EXPECT_LT(run.records[i].send_time, offsets[i] + 5 * kLate);
  }
  peak = 0;
  const RunResult capped = run_against(server.url(), simple_workload(6, 3), {2, INFINITY, 1, 0});
  EXPECT_EQ(capped.summary.completed, 6u);
  // The fake server counts a connection until its handler returns, which can trail the
  // client's own completion by a moment: one over the cap is that overlap, six is no cap.
  EXPECT_LE(peak.load(), 3);
}

TEST(BenchHttp, MultiTurnResendsTheRealAnswers) {
  FakeServer server([](FakeConnection& c, const std::string&) { stream_tokens(c, 1ms, 1ms, 3); });
  std::vector<Conversation> w(1);
  w[0].preamble.push_back({"system", "SYS"});
  w[0].turns = {{"first question", 3}, {"second question", 3}};
  boost::asio::io_context io;
  HttpBackendOptions options;
  options.target = parse_url(server.url());
  options.chat = true;
  HttpBackend backend(io, options);
  RunnerOptions runner;
  runner.arrival = {1, 0, 1, 0};
  const RunResult run = run_benchmark(io, backend, w, runner);
  ASSERT_EQ(run.summary.completed, 2u);
  EXPECT_EQ(run.records[1].turn, 1);
  const nlohmann::json second = nlohmann::json::parse(server.bodies().at(1));
  ASSERT_EQ(second["messages"].size(), 4u);
  EXPECT_EQ(second["messages"][0]["content"], "SYS");
  EXPECT_EQ(second["messages"][2]["role"], "assistant");
  EXPECT_EQ(second["messages"][2]["content"], "t0t1t2");
  EXPECT_EQ(second["messages"][3]["content"], "second question");
}

TEST(BenchHttp, UrlParsing) {
  HttpTarget t = parse_url("http://127.0.0.1:8080");
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, "8080");
  EXPECT_EQ(t.prefix, "");
  t = parse_url("http://localhost/api/");
  EXPECT_EQ(t.port, "80");
  EXPECT_EQ(t.prefix, "/api");
  t = parse_url("http://[::1]:9000");
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.port, "9000");
  EXPECT_THROW(parse_url("https://example.com"), Error);
  EXPECT_THROW(parse_url("127.0.0.1:8080"), Error);
}

}  // namespace
}  // namespace rapide::loadgen
