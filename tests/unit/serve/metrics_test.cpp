// Prometheus exposition: cumulative buckets (le inclusive), counters by status, engine gauges.
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace rapide::serve {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(Histogram, BucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7.0);
  std::string out;
  h.render("x", out);
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"0.1\"} 1")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"1\"} 3")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"+Inf\"} 4")) << out;
  EXPECT_TRUE(has_line(out, "x_count 4")) << out;
  EXPECT_TRUE(has_line(out, "x_sum 8.05")) << out;
}

TEST(Histogram, AnObservationOnABoundCountsInThatBucket) {
  // Prometheus' le is inclusive: 0.1 is <= 0.1, so the 0.1 bucket counts it.
  Histogram h({0.1, 1.0, 2.5});
  h.observe(0.1);
  h.observe(1.0);
  h.observe(1.0);
  h.observe(2.5);
  std::string out;
  h.render("x", out);
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"0.1\"} 1")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"1\"} 3")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"2.5\"} 4")) << out;
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"+Inf\"} 4")) << out;
  // Just above a bound goes to the next bucket.
  Histogram above({0.1, 1.0});
  above.observe(0.10000001);
  out.clear();
  above.render("y", out);
  EXPECT_TRUE(has_line(out, "y_bucket{le=\"0.1\"} 0")) << out;
  EXPECT_TRUE(has_line(out, "y_bucket{le=\"1\"} 1")) << out;
}

TEST(ServeMetrics, RendersRequestsAndEngineGauges) {
  ServeMetrics m;
  m.observe_status("completions", 200);
  m.observe_status("completions", 200);
  m.observe_status("chat.completions", 499);
  SequenceObservation s;
  s.ttft = 0.02;
  s.tpot = 0.004;
  s.e2e = 0.5;
  s.prompt_tokens = 100;
  s.cached_prompt_tokens = 25;
  m.observe_sequence(s);
  m.observe_inter_token(0.003);
  EngineStats e;
  e.waiting = 3;
  e.running = 2;
  e.kv.total_blocks = 10;
  e.kv.used_blocks = 4;
  e.kv.free_blocks = 6;
  e.preemptions = 1;
  e.generated_tokens = 77;
  StepStats step;
  step.sequences = 2;
  e.recent_steps.push_back(step);
  const std::string text = m.render(&e, 1);
  EXPECT_TRUE(has_line(text, "rapide_requests_total{endpoint=\"completions\",status=\"200\"} 2"));
  EXPECT_TRUE(
      has_line(text, "rapide_requests_total{endpoint=\"chat.completions\",status=\"499\"} 1"));
  EXPECT_TRUE(has_line(text, "rapide_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(has_line(text, "rapide_inter_token_latency_seconds_count 1"));
  EXPECT_TRUE(has_line(text, "rapide_prefix_cache_hit_rate 0.25"));
  EXPECT_TRUE(has_line(text, "rapide_queue_length 3"));
  EXPECT_TRUE(has_line(text, "rapide_running_sequences 2"));
  EXPECT_TRUE(has_line(text, "rapide_batch_size 2"));
  EXPECT_TRUE(has_line(text, "rapide_kv_blocks_used 4"));
  EXPECT_TRUE(has_line(text, "rapide_kv_blocks_free 6"));
  EXPECT_TRUE(has_line(text, "rapide_preemptions_total 1"));
  EXPECT_TRUE(has_line(text, "rapide_generation_tokens_total 77"));
  EXPECT_TRUE(has_line(text, "rapide_server_state 1"));
  // Every sample has its TYPE line.
  EXPECT_NE(text.find("# TYPE rapide_time_per_output_token_seconds histogram"), std::string::npos);
}

TEST(ServeMetrics, EverySampleCarriesTheModelName) {
  // vLLM's Grafana dashboards select every panel's series by model_name.
  ServeMetrics m;
  m.observe_status("completions", 200);
  SequenceObservation s;
  s.ttft = 0.02;
  m.observe_sequence(s);
  m.set_model_name("my \"model\"");
  EngineStats e;
  e.running = 2;
  const std::string text = m.render(&e, 1);
  const std::string label = "model_name=\"my \\\"model\\\"\"";
  EXPECT_TRUE(has_line(
      text, "rapide_requests_total{" + label + ",endpoint=\"completions\",status=\"200\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "rapide_running_sequences{" + label + "} 2")) << text;
  EXPECT_TRUE(has_line(text, "rapide_time_to_first_token_seconds_count{" + label + "} 1")) << text;
  EXPECT_TRUE(
      has_line(text, "rapide_time_to_first_token_seconds_bucket{" + label + ",le=\"+Inf\"} 1"))
      << text;
  size_t samples = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_NE(line.find("{" + label), std::string::npos) << line;
  }
  EXPECT_GT(samples, 20u);
}

TEST(ServeMetrics, RendersSpeculationOnlyWhenOn) {
  ServeMetrics m;
  EngineStats e;
  EXPECT_EQ(m.render(&e, 1).find("rapide_spec_"), std::string::npos);
  e.spec_enabled = true;
  e.spec.verifications = 4;
  e.spec.proposed = 16;
  e.spec.accepted = 12;
  e.spec.accepted_histogram = {1, 0, 0, 0, 3};
  e.spec.last_k = 4;
  const std::string text = m.render(&e, 1);
  EXPECT_TRUE(has_line(text, "rapide_spec_proposed_tokens_total 16")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_accepted_tokens_total 12")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_acceptance_rate 0.75")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_mean_accepted_length 3")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_accepted_length_bucket{le=\"0\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_accepted_length_bucket{le=\"3\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_accepted_length_bucket{le=\"4\"} 4")) << text;
  EXPECT_TRUE(has_line(text, "rapide_spec_accepted_length_count 4")) << text;
}

}  // namespace
}  // namespace rapide::serve
