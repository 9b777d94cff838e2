// The dashboard's server side: the latency window's percentiles (numpy's linear "type 7",
// worked by hand), the state JSON built from an EngineStats, and the embedded files.
#include <gtest/gtest.h>

#include <chrono>

#include "serve/dashboard_assets.h"
#include "serve/dashboard_state.h"
#include "serve/latency_window.h"

namespace rapide::serve {
namespace {

using std::chrono::milliseconds;

TEST(LatencyWindow, PercentilesOfTheSamplesInTheWindow) {
  LatencyWindow w;
  const TimePoint now = Clock::now();
  for (int i = 1; i <= 100; ++i) w.add(now - milliseconds(100), i * 1e-3);
  w.add(now - milliseconds(20000), 5.0);  // older than the window: not counted
  const auto p = w.percentiles(now, 10.0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->count, 100u);
  // Ranks p/100 * 99 of 1..100 ms: 50.5, 90.1 and 99.01 ms.
  EXPECT_NEAR(p->p50, 50.5e-3, 1e-12);
  EXPECT_NEAR(p->p90, 90.1e-3, 1e-12);
  EXPECT_NEAR(p->p99, 99.01e-3, 1e-12);
}

TEST(LatencyWindow, EmptyWindowHasNoPercentiles) {
  LatencyWindow w;
  const TimePoint now = Clock::now();
  EXPECT_FALSE(w.percentiles(now, 5.0).has_value());
  w.add(now - milliseconds(6000), 1.0);
  EXPECT_FALSE(w.percentiles(now, 5.0).has_value());
}

TEST(LatencyWindow, KeepsOnlyTheNewestSamples) {
  LatencyWindow w(4);
  const TimePoint now = Clock::now();
  for (int i = 1; i <= 10; ++i) w.add(now, i);
  const auto p = w.percentiles(now, 1.0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->count, 4u);
  EXPECT_DOUBLE_EQ(p->p50, 8.5);  // 7, 8, 9, 10
}

TEST(DashboardState, LoadingHasNoEngineFigures) {
  DashboardInputs in;
  in.state = "loading";
  in.model = "loading";
  const auto j = dashboard_state(in);
  EXPECT_EQ(j["state"], "loading");
  EXPECT_FALSE(j.contains("requests"));
  EXPECT_FALSE(j.contains("kv"));
}

TEST(DashboardState, FiguresFromTheEngineSnapshot) {
  EngineStats e;
  const TimePoint now = Clock::now();
  auto step = [&](int ms_ago, int prefill, int decode) {
    StepStats s;
    s.start = now - milliseconds(ms_ago);
    s.prefill_tokens = prefill;
    s.decode_tokens = decode;
    e.recent_steps.push_back(s);
  };
  step(9000, 100, 100);  // before the 5 s window
  step(3000, 10, 0);
  step(2000, 0, 4);
  step(1000, 2, 4);
  e.steps = 4;
  e.running = 3;
  e.waiting = 2;
  e.computed_prompt_tokens = 1234;
  e.decoded_tokens = 567;
  e.preemptions = 1;
  e.kv.total_blocks = 100;
  e.kv.used_blocks = 40;
  e.kv.free_blocks = 60;
  e.kv.cached_free_blocks = 15;
  e.prefix_cache_enabled = true;
  e.prefix_cache.prompt_tokens = 200;
  e.prefix_cache.ram_hit_tokens = 30;
  e.prefix_cache.tier_hit_tokens = 20;
  for (int i = 1; i <= 7; ++i) {
    PrefixMissRecord m;
    m.request_id = static_cast<uint64_t>(i);
    m.prompt_text = "7. rest";
    m.cached_text = "1. rest";
    e.recent_misses.push_back(m);
  }
  DashboardInputs in;
  in.state = "ready";
  in.model = "m";
  in.engine = &e;
  in.now = now;
  in.window = 5.0;
  in.latency.ttft = LatencyPercentiles{3, 0.1, 0.2, 0.3};
  const auto j = dashboard_state(in);

  EXPECT_EQ(j["requests"]["running"], 3);
  EXPECT_EQ(j["requests"]["waiting"], 2);
  EXPECT_EQ(j["tokens"]["prompt_computed"], 1234);
  EXPECT_EQ(j["tokens"]["decoded"], 567);
  // Three steps in the window: prefill (10 + 0 + 2) / 3, decode (0 + 4 + 4) / 3.
  EXPECT_DOUBLE_EQ(j["steps"]["prefill_rows"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["steps"]["decode_rows"].get<double>(), 8.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["steps"]["per_second"].get<double>(), 3.0 / 5.0);
  EXPECT_EQ(j["kv"]["used"], 40);
  EXPECT_EQ(j["kv"]["cached"], 15);
  EXPECT_DOUBLE_EQ(j["prefix_cache"]["hit_rate"].get<double>(), 0.25);
  EXPECT_EQ(j["preemptions"], 1);
  // Newest first, at most kDashboardNearMisses.
  const auto& misses = j["prefix_cache"]["near_misses"];
  ASSERT_EQ(misses.size(), kDashboardNearMisses);
  EXPECT_EQ(misses[0]["request_id"], 7);
  EXPECT_EQ(misses[0]["prompt"], "7. rest");
  EXPECT_EQ(misses[0]["cached"], "1. rest");
  EXPECT_DOUBLE_EQ(j["latency"]["ttft"]["p99"].get<double>(), 0.3);
  EXPECT_TRUE(j["latency"]["itl"].is_null());
  EXPECT_FALSE(j["speculative"]["enabled"].get<bool>());
  EXPECT_TRUE(j["advice"].is_null());
}

TEST(DashboardAssets, ThePageAndUplotAreEmbedded) {
  const EmbeddedAsset* page = find_dashboard_asset("/dashboard");
  ASSERT_NE(page, nullptr);
  EXPECT_TRUE(page->body.starts_with("<!doctype html>"));
  EXPECT_NE(page->body.find("/dashboard/uplot.js"), std::string_view::npos);
  EXPECT_STREQ(dashboard_content_type(page->path), "text/html; charset=utf-8");
  const EmbeddedAsset* uplot = find_dashboard_asset("/dashboard/uplot.js");
  ASSERT_NE(uplot, nullptr);
  EXPECT_NE(uplot->body.find("uPlot"), std::string_view::npos);
  EXPECT_GT(uplot->body.size(), 10000u);  // the minified library, not a stub
  EXPECT_STREQ(dashboard_content_type("/dashboard/app.css"), "text/css; charset=utf-8");
  EXPECT_EQ(find_dashboard_asset("/dashboard/secret"), nullptr);
  EXPECT_EQ(find_dashboard_asset("/dashboard/../etc/passwd"), nullptr);
}

}  // namespace
}  // namespace rapide::serve
