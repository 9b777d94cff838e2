// Length distributions, arrival schedules and workload shapes: deterministic for a seed and
// shaped as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>

#include "base/error.h"
#include "loadgen/arrival.h"
#include "loadgen/length_dist.h"
#include "loadgen/workload.h"

namespace rapide::loadgen {
namespace {

TEST(BenchLengthDist, Forms) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(LengthDist::parse("200").sample(rng), 200);
  const LengthDist uniform = LengthDist::parse("10-20");
  for (int i = 0; i < 200; ++i) {
    const int v = uniform.sample(rng);
    EXPECT_GE(v, 10);
    EXPECT_LE(v, 20);
  }
  EXPECT_EQ(uniform.mean(), 15);
  const LengthDist mix = LengthDist::parse("10-50@0.8+500-1000@0.2");
  EXPECT_DOUBLE_EQ(mix.mean(), 0.8 * 30 + 0.2 * 750);
  int long_ones = 0;
  for (int i = 0; i < 2000; ++i) long_ones += mix.sample(rng) >= 500;
  EXPECT_NEAR(long_ones, 400, 80);
  const LengthDist normal = LengthDist::parse("normal:100:10");
  double sum = 0;
  for (int i = 0; i < 2000; ++i) sum += normal.sample(rng);
  EXPECT_NEAR(sum / 2000, 100, 2);
  for (const char* bad : {"", "x", "20-10", "normal:5", "10@0", "10@x", "-5"}) {
    EXPECT_THROW(LengthDist::parse(bad), Error) << bad;
  }
}

TEST(BenchArrival, PoissonAndGammaKeepTheRateAndSeed) {
  for (const double burstiness : {1.0, 0.25, 4.0}) {
    ArrivalPattern p{0, 10.0, burstiness, 42};
    const std::vector<double> t = arrival_offsets(p, 5001);
    EXPECT_EQ(t.front(), 0.0);
    EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
    EXPECT_NEAR(t.back() / 5000, 0.1, 0.01) << burstiness;  // mean gap = 1 / rate
    EXPECT_EQ(arrival_offsets(p, 50), std::vector<double>(t.begin(), t.begin() + 50));
    // Burstier arrivals have a larger spread of gaps (coefficient of variation 1/sqrt(k)).
    std::vector<double> gaps(t.size() - 1);
    for (size_t i = 1; i < t.size(); ++i) gaps[i - 1] = t[i] - t[i - 1];
    double var = 0;
    for (const double g : gaps) var += (g - 0.1) * (g - 0.1);
    const double cv = std::sqrt(var / gaps.size()) / 0.1;
    EXPECT_NEAR(cv, 1 / std::sqrt(burstiness), 0.15 / std::sqrt(burstiness)) << burstiness;
  }
  ArrivalPattern all_at_once{0, INFINITY, 1.0, 0};
  EXPECT_EQ(arrival_offsets(all_at_once, 3), std::vector<double>(3, 0.0));
  EXPECT_EQ(parse_rates("1,2.5,inf").size(), 3u);
  EXPECT_THROW(parse_rates("1,0"), Error);
  EXPECT_THROW(parse_rates("fast"), Error);
  EXPECT_EQ((ArrivalPattern{8, 0, 1, 0}).label(), "concurrency=8");
  EXPECT_EQ((ArrivalPattern{0, 2, 1, 0}).label(), "rate=2/s");
}

// A token counter where every word is two tokens, to check length fitting.
size_t two_per_word(const std::string& text) {
  return 2 * static_cast<size_t>(std::count(text.begin(), text.end(), ' ') + 1);
}

TEST(BenchWorkload, SharedPrefixSharesExactlyTheSystemPrompt) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kSharedPrefix;
  o.num_requests = 6;
  o.prefix_len = 100;
  o.num_prefixes = 2;
  o.input_len = LengthDist(10);
  o.output_len = LengthDist(7);
  const std::vector<Conversation> w = build_workload(o, two_per_word);
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0].preamble[0].content, w[2].preamble[0].content);
  EXPECT_NE(w[0].preamble[0].content, w[1].preamble[0].content);
  EXPECT_EQ(two_per_word(w[0].preamble[0].content), 100u);
  EXPECT_EQ(two_per_word(w[0].turns[0].user), 10u);
  EXPECT_NE(w[0].turns[0].user, w[2].turns[0].user);
  EXPECT_EQ(w[3].turns[0].output_tokens, 7);
  const std::string prompt = render_prompt({w[0].preamble[0], {"user", w[0].turns[0].user}});
  EXPECT_EQ(prompt.rfind(w[0].preamble[0].content, 0), 0u);  // the prefix comes first
}

TEST(BenchWorkload, ShapesAndDeterminism) {
  WorkloadOptions o;
  o.num_requests = 10;
  o.kind = WorkloadKind::kMultiTurn;
  o.turns = 4;
  std::vector<Conversation> w = build_workload(o, {});
  ASSERT_EQ(w.size(), 3u);  // 4 + 4 + 2 turns
  EXPECT_EQ(w[2].turns.size(), 2u);
  o.kind = WorkloadKind::kRag;
  o.context_len = 300;
  o.num_docs = 2;
  w = build_workload(o, two_per_word);
  ASSERT_EQ(w.size(), 10u);
  size_t distinct = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= w[j].preamble[0].content == w[i].preamble[0].content;
    distinct += !seen;
  }
  EXPECT_LE(distinct, 2u);
  o.kind = WorkloadKind::kVariableOutput;
  const std::vector<Conversation> a = build_workload(o, {});
  const std::vector<Conversation> b = build_workload(o, {});
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].turns[0].user, b[i].turns[0].user);
    EXPECT_EQ(a[i].turns[0].output_tokens, b[i].turns[0].output_tokens);
  }
  o.text_seed = 99;  // new words, same lengths
  const std::vector<Conversation> c = build_workload(o, {});
  EXPECT_NE(a[0].turns[0].user, c[0].turns[0].user);
  EXPECT_EQ(a[0].turns[0].output_tokens, c[0].turns[0].output_tokens);
}

TEST(BenchWorkload, JsonlDataset) {
  const std::string path = ::testing::TempDir() + "/bench_dataset.jsonl";
  {
    std::ofstream out(path);
    out << R"({"prompt": "Tell me a story", "output_len": 40})"
        << "\n\n"
        << R"({"messages": [{"role": "system", "content": "Be brief"},)"
        << R"( {"role": "user", "content": "Hi"}]})"
        << "\n"
        << R"({"prompt": "third"})"
        << "\n";
  }
  WorkloadOptions o;
  o.kind = WorkloadKind::kJsonl;
  o.dataset = path;
  o.num_requests = 2;
  o.output_len = LengthDist(9);
  const std::vector<Conversation> w = build_workload(o, {});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].turns[0].user, "Tell me a story");
  EXPECT_EQ(w[0].turns[0].output_tokens, 40);
  EXPECT_EQ(w[1].preamble.size(), 1u);
  EXPECT_EQ(w[1].turns[0].user, "Hi");
  EXPECT_EQ(w[1].turns[0].output_tokens, 9);
  EXPECT_EQ(render_prompt({{"system", "Be brief"}, {"user", "Hi"}}),
            "Be brief\n\nUser: Hi\nAssistant:");
  {
    std::ofstream out(path);
    out << "{\"text\": \"no prompt\"}\n";
  }
  EXPECT_THROW(build_workload(o, {}), Error);
  o.dataset = path + ".missing";
  EXPECT_THROW(build_workload(o, {}), Error);
}

}  // namespace
}  // namespace rapide::loadgen
