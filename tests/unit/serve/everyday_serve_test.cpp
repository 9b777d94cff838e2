// The server's everyday pieces that need no socket (issue 20): the CORS policy, the request
// log line's fields in both formats, and the periodic engine line (quiet while idle).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/cors.h"
#include "serve/request_log.h"
#include "serve/stats_log.h"

namespace rapide::serve {
namespace {

std::string header(const HeaderList& headers, const std::string& name) {
  for (const auto& [n, v] : headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(Cors, OffByDefaultAndOnlyForListedOrigins) {
  const CorsPolicy off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.response_headers("https://a.example").empty());

  const CorsPolicy listed({"https://a.example"});
  EXPECT_EQ(header(listed.response_headers("https://a.example"), "Access-Control-Allow-Origin"),
            "https://a.example");
  EXPECT_TRUE(listed.response_headers("https://b.example").empty());
  EXPECT_TRUE(listed.response_headers("").empty());  // not a cross-origin request
  const HeaderList preflight = listed.preflight_headers("https://a.example");
  EXPECT_NE(header(preflight, "Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_NE(header(preflight, "Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);

  const CorsPolicy any({"*"});
  EXPECT_EQ(header(any.response_headers("https://b.example"), "Access-Control-Allow-Origin"),
            "https://b.example");
}

RequestRecord generation_record() {
  RequestRecord r;
  r.id = "req-3";
  r.client = "127.0.0.1:5000";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.status = 200;
  r.prompt_tokens = 12;
  r.completion_tokens = 7;
  r.ttft = 0.25;
  r.tpot = 0.0125;
  r.finish_reason = "stop";
  return r;
}

TEST(RequestLog, TextLineHasEveryField) {
  const std::string line = format_request_line(generation_record(), 0.5, LogFormat::kText);
  EXPECT_EQ(line,
            "request req-3 127.0.0.1:5000 POST /v1/chat/completions 200 prompt_tokens=12 "
            "completion_tokens=7 ttft=0.2500s tpot=0.0125s e2e=0.5000s finish=stop");
}

TEST(RequestLog, ErrorsAndPromptsAreQuotedSoTheLineStaysOneLine) {
  RequestRecord r = generation_record();
  r.status = 400;
  r.error = "bad \"value\"\nsecond line";
  r.prompt = "tell me\na story";
  const std::string line = format_request_line(r, 0.001, LogFormat::kText);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(R"(error="bad \"value\"\nsecond line")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"(prompt="tell me\na story")"), std::string::npos) << line;
}

TEST(RequestLog, JsonLineIsAnObjectWithTheSameFields) {
  const auto j =
      nlohmann::json::parse(format_request_line(generation_record(), 0.5, LogFormat::kJson));
  EXPECT_EQ(j["event"], "request");
  EXPECT_EQ(j["request_id"], "req-3");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_EQ(j["completion_tokens"], 7);
  EXPECT_DOUBLE_EQ(j["ttft_s"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["e2e_s"].get<double>(), 0.5);
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_FALSE(j.contains("prompt"));  // only with --log-prompts
}

TEST(StatsLog, RatesOverTheIntervalAndSilentWhenIdle) {
  const TimePoint t0 = Clock::now();
  StatsLog log(t0);
  EngineStats s;
  EXPECT_FALSE(log.line(s, t0, LogFormat::kText).has_value()) << "idle at start";
  s.computed_prompt_tokens = 200;
  s.decoded_tokens = 50;
  s.running = 2;
  s.waiting = 1;
  s.kv.total_blocks = 100;
  s.kv.used_blocks = 25;
  s.prefix_cache_enabled = true;
  s.prefix_cache.prompt_tokens = 200;
  s.prefix_cache.ram_hit_tokens = 50;
  const auto line = log.line(s, t0 + std::chrono::seconds(2), LogFormat::kText);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "engine: prompt 100.0 tok/s, generation 25.0 tok/s, running 2, queued 1, KV 25.0% "
            "used, prefix-cache hit rate 25.0%");
  s.running = 0;
  s.waiting = 0;
  EXPECT_FALSE(log.line(s, t0 + std::chrono::seconds(4), LogFormat::kText).has_value())
      << "nothing ran since the last line";
}

// A short burst that ended before the first tick still gets its line: the first interval
// starts when the log (and the engine, counters at zero) started.
TEST(StatsLog, WorkBeforeTheFirstTickIsCounted) {
  const TimePoint t0 = Clock::now();
  StatsLog log(t0);
  EngineStats s;
  s.computed_prompt_tokens = 8;
  s.decoded_tokens = 8;
  const auto line = log.line(s, t0 + std::chrono::milliseconds(500), LogFormat::kText);
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("prompt 16.0 tok/s, generation 16.0 tok/s, running 0"), std::string::npos)
      << *line;
}

}  // namespace
}  // namespace rapide::serve
