// The scenario suite on recorded states: each scenario builds the engine record a workload
// with one built-in bottleneck leaves (the figures a real run produces, written by hand) and
// checks that the advisor names that bottleneck first, with its evidence and a prediction
// computed from the figures. bench/advisor.sh and cli_advise_test run real workloads.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "advise/advisor.h"
#include "advise/verification.h"

namespace rapide::advise {
namespace {

// A healthy deployment: Q8_0 weights well inside memory, continuous batching, paged KV,
// prefix cache on and hitting, four users decoding together, no preemption.
EngineState healthy() {
  EngineState s;
  s.model.name = "test";
  s.model.parameters = 100'000'000;
  s.model.weight_bytes = 106'250'000;  // Q8_0
  s.model.max_context = 2048;
  s.model.kv_bytes_per_token = 16384;
  s.machine = {2, 2, 16ull << 30, 8ull << 30, 20e9};
  s.config.batching = "continuous";
  s.config.kv_layout = "paged";
  s.config.kv_type = "f16";
  s.config.spec = "off";
  s.config.kv_block_size = 16;
  s.config.kv_total_blocks = 4096;
  s.config.max_batch_tokens = 512;
  s.config.max_seqs = 64;
  s.config.prefill_chunk = 512;
  s.config.prefix_cache = true;
  for (int i = 0; i < 200; ++i) {
    StepRecord r;
    r.sequences = 3 + i % 3;  // 3..5 rows: 20 ms + 2 ms per row
    r.decode_tokens = r.sequences;
    r.seconds = 0.020 + 0.002 * r.sequences;
    r.running = r.sequences;
    r.kv_reserved_positions = 400 * r.sequences;
    r.kv_used_positions = 380 * r.sequences;
    s.steps.push_back(r);
    s.step_totals.add(r.sequences, 0, r.decode_tokens, 0, 0, r.running, 0, 2000, r.seconds);
  }
  for (int i = 0; i < 40; ++i) {
    RequestSummary q;
    q.arrival = i * 0.5;
    q.ttft = 0.08;
    q.tpot = 0.028;
    q.e2e = 0.08 + 0.028 * 127;
    q.prompt_tokens = 256;
    q.completion_tokens = 128;
    q.finish = "length";
    s.requests.push_back(q);
  }
  s.sharing = {40, 40 * 256, 39 * 192, 39};
  s.prefix = {true, 40, 39, 40 * 256, 39 * 192, 0, false};
  s.counters.preemptions = 0;
  return s;
}

Finding headline(const Advice& a) {
  EXPECT_FALSE(a.healthy()) << format_advice(a);
  return a.findings.at(static_cast<size_t>(std::max(0, a.headline)));
}

Advice run(const EngineState& s, const loadgen::RunResult* r = nullptr, std::string draft = {}) {
  AdviseInput in;
  in.state = &s;
  in.run = r;
  in.draft_model = std::move(draft);
  return advise(in);
}

TEST(Advisor, HealthyDeploymentGetsNothingToChange) {
  const Advice a = run(healthy());
  EXPECT_TRUE(a.healthy()) << format_advice(a);
  EXPECT_NE(format_advice(a).find("nothing to change"), std::string::npos);
  EXPECT_EQ(a.findings.size(), 10u);
  // Nothing to change names the configuration as it is.
  EXPECT_NE(headline_text(a).find("prefix cache on"), std::string::npos) << headline_text(a);
  EXPECT_EQ(a.findings[0].question, 1);
  EXPECT_EQ(a.findings[5].question, 6);
}

TEST(Advisor, F32WeightsAtBatchOneAreQuantizedWithPredictedTpot) {
  EngineState s = healthy();
  s.model.weight_bytes = 400'000'000;  // F32: 20 ms at 20 GB/s
  s.steps.clear();
  s.step_totals = {};
  for (int i = 0; i < 100; ++i) {
    StepRecord r;
    r.sequences = r.decode_tokens = r.running = 1;
    r.seconds = 0.030;  // 67 % of the roofline
    s.steps.push_back(r);
    s.step_totals.add(1, 0, 1, 0, 0, 1, 0, 2000, r.seconds);
  }
  for (RequestSummary& q : s.requests) q.tpot = 0.030;
  const Advice a = run(s);
  const Finding& f = headline(a);
  EXPECT_EQ(f.id, "quantize");
  EXPECT_EQ(f.question, 1);
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_EQ(f.prediction->metric, Metric::kTpotP50);
  EXPECT_DOUBLE_EQ(f.prediction->before, 0.030);
  // Weights' share min(1, 0.667 / 0.7) = 0.952 of 30 ms falls to 34/128 of itself.
  const double share = (0.020 / 0.030) / 0.7;
  EXPECT_NEAR(f.prediction->after, 0.030 * (1 - share * (1 - 34.0 / 128.0)), 1e-9);
  EXPECT_NE(f.evidence[1].find("67 %"), std::string::npos) << f.evidence[1];
  EXPECT_NE(f.verdict.find("F32"), std::string::npos);
  // Not an engine flag: the change reads as the command that makes the file.
  EXPECT_EQ(change_text(f),
            "rapide quantize MODEL MODEL-q8_0.gguf --type q8_0, then -m MODEL-q8_0.gguf");
}

TEST(Advisor, TimestampBeforeTheSystemPromptIsDynamicContentEarly) {
  EngineState s = healthy();
  s.sharing = {40, 40 * 1000, 0, 0};
  s.prefix = {true, 40, 0, 40 * 1000, 0, 0, false};
  for (int i = 0; i < 5; ++i) {
    PrefixMissRecord m;
    m.prompt_tokens = 1000;
    m.matched_tokens = 9;
    m.same_characters = 40;
    m.before = "Current time: 2026-11-29T10:04:";
    m.prompt_text = std::to_string(11 + i) + "Z\nYou are a helpful assistant";
    m.cached_text = std::to_string(10 + i) + "Z\nYou are a helpful assistant";
    s.misses.push_back(m);
  }
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "static-content-first");
  EXPECT_EQ(f.question, 2);
  const std::string evidence = f.evidence.back();
  EXPECT_NE(evidence.find("2026-11-29T10:04:15Z"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("40 characters in"), std::string::npos) << evidence;
  EXPECT_NE(f.verdict.find("timestamp"), std::string::npos);
  EXPECT_NE(f.lever.find("after the static content"), std::string::npos);
}

TEST(Advisor, ShuffledJsonKeysAreNonDeterministicSerialization) {
  EngineState s = healthy();
  s.prefix = {true, 40, 0, 40 * 1000, 0, 0, false};
  for (int i = 0; i < 3; ++i) {
    PrefixMissRecord m;
    m.same_characters = 120;
    m.before = "Tools: {";
    m.prompt_text = "\"name\": \"search\", \"args\": 2}";
    m.cached_text = "\"args\": 2, \"name\": \"search\"}";
    s.misses.push_back(m);
  }
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "canonical-serialization");
  EXPECT_NE(f.verdict.find("non-deterministic serialization"), std::string::npos);
}

// The engine recorded no near miss (the first version missed ids in the first block), but
// its recent prompts carry a request id before the shared text: the lint's rules on them
// are enough, and the two ids are shown.
TEST(Advisor, RecentPromptsWithAnIdFirstAreDynamicContentWithoutNearMisses) {
  EngineState s = healthy();
  s.sharing = {12, 12 * 400, 0, 0};
  s.prefix = {true, 12, 0, 12 * 400, 0, 0, false};
  std::string system;
  for (int i = 0; i < 20; ++i) system += "Rule " + std::to_string(i) + ": answer briefly.\n";
  for (int i = 0; i < 12; ++i) {
    s.prompts.push_back(fmt::format("{:08x}-77b0-4c1d-9a4e-0c7d1b2e3f{:02x}\n", 0x3f2a9c1e + i, i) +
                        system + "Question " + std::to_string(i));
  }
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "static-content-first") << f.verdict;
  EXPECT_NE(f.verdict.find("identifier"), std::string::npos) << f.verdict;
  bool values = false;
  for (const std::string& e : f.evidence) {
    values = values || (e.find("they differ at `3f2a9c1f-77b0-4c1d-9a4e-0c7d1b2e3f01`") == 0 &&
                        e.find("`3f2a9c1e-77b0-4c1d-9a4e-0c7d1b2e3f00`") != std::string::npos);
  }
  EXPECT_TRUE(values) << format_advice(run(s));
  // One such prompt is a signal below the threshold: named, not a lever.
  s.prompts.resize(2);
  s.prompts[0] = system + "Question A";
  const Advice one = run(s);
  EXPECT_FALSE(one.findings[1].fires) << format_advice(one);
}

// Cached prefixes evicted before they recur (6 system prompts in rotation, a small KV): the
// hit rate far below the ideal sharing, and evictions, name KV capacity with a size from the
// peak blocks in use and the blocks that recurred; the same miss without evictions does not.
TEST(Advisor, EvictionThrashIsKvCapacitySizedFromPeakUse) {
  EngineState s = healthy();
  s.config.kv_total_blocks = 25;
  s.step_totals.min_free_blocks = 1;              // 24 blocks held at the peak
  s.sharing = {24, 24 * 400, 24 * 290, 18, 150};  // 73 % shareable, 150 blocks recurred
  s.prefix = {true, 24, 0, 24 * 400, 0, 429, false};
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "prefix-eviction");
  EXPECT_NE(f.verdict.find("not dynamic content"), std::string::npos) << f.verdict;
  // (24 + 150) x 1.25 = 218 blocks of 16 x 16 KiB: 54.5 MiB -> 55 MiB.
  ASSERT_EQ(f.flags.size(), 1u);
  EXPECT_EQ(f.flags[0].first, "--kv-memory");
  EXPECT_EQ(f.flags[0].second, "55MiB");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_EQ(f.prediction->metric, Metric::kTtftMean);
  // The computed part of TTFT (beyond a decode step) falls from all of it to 27.5 %.
  EXPECT_NEAR(f.prediction->after, 0.028 + (0.08 - 0.028) * (1 - 290.0 / 400), 1e-4);
  // Not enough memory for that: KV quantization when it holds enough, else offload.
  s.machine.memory_available = 64ull << 20;
  EXPECT_EQ(headline(run(s)).flags[0].first, "--kv-offload-ram");
  // Without evictions the same gap is no capacity problem.
  s.prefix.evicted_blocks = 0;
  EXPECT_EQ(headline(run(s)).id, "prefix-cache-misses");
  // A gap under a fifth of the prompt tokens is a signal, not a lever.
  s.prefix = {true, 24, 0, 24 * 400, 24 * 230, 429, false};  // 58 % hit vs 73 %
  const Advice near_ideal = run(s);
  EXPECT_FALSE(near_ideal.findings[1].fires) << format_advice(near_ideal);
  EXPECT_TRUE(near_ideal.findings[1].suspected);
}

// --max-seqs 2 with 8 users: requests wait at the cap with the KV nearly empty.
TEST(Advisor, RequestsWaitingAtTheSequenceCapWithKvFreeRaiseIt) {
  EngineState s = healthy();
  s.config.max_seqs = 2;
  s.steps.clear();
  s.step_totals = {};
  for (int i = 0; i < 200; ++i) {
    StepRecord r;
    r.sequences = r.decode_tokens = r.running = 2;
    r.waiting = 6;
    r.seconds = 0.024;
    r.kv_free_blocks = 4000;
    s.steps.push_back(r);
    s.step_totals.add(2, 0, 2, 0, 0, 2, 6, 4000, r.seconds);
  }
  for (RequestSummary& q : s.requests) {
    q.queue = 0.3;
    q.ttft = 0.33;
  }
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "scheduler-limits");
  ASSERT_EQ(f.flags.size(), 1u);
  EXPECT_EQ(f.flags[0].first, "--max-seqs");
  EXPECT_EQ(f.flags[0].second, "8");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_NEAR(f.prediction->after, 0.03, 1e-6);
  // Waiting for KV memory is not a scheduler limit.
  for (StepRecord& r : s.steps) r.kv_free_blocks = 2;
  EXPECT_NE(run(s).findings[8].fires, true) << format_advice(run(s));
}

// A failure signal below its threshold outranks an optional lever: one near miss on a
// single-user workload where speculation would otherwise lead.
TEST(Advisor, ASignalBelowItsThresholdOutranksAnOptionalLever) {
  EngineState s = healthy();
  s.steps.clear();
  s.step_totals = {};
  for (int i = 0; i < 100; ++i) {
    StepRecord r;
    r.sequences = r.decode_tokens = r.running = 1;
    r.seconds = 0.010;
    s.steps.push_back(r);
    s.step_totals.add(1, 0, 1, 0, 0, 1, 0, 2000, r.seconds);
  }
  for (RequestSummary& q : s.requests) {
    q.tpot = 0.010;
    q.lookup_tokens = 64;
    q.lookup_hits = 48;
  }
  s.sharing = {40, 40 * 1000, 0, 0};
  s.prefix = {true, 40, 0, 40 * 1000, 0, 0, false};
  EXPECT_EQ(headline(run(s)).id, "speculative");
  PrefixMissRecord m;
  m.same_characters = 3;
  m.realigned = true;
  m.before = "id ";
  m.prompt_text = "a1 You are";
  m.cached_text = "b2 You are";
  m.prompt_value = "a1";
  m.cached_value = "b2";
  s.misses.push_back(m);
  const Advice a = run(s);
  const Finding& h = headline(a);
  EXPECT_EQ(h.id, "prefix-cache");
  EXPECT_FALSE(h.fires);
  EXPECT_TRUE(h.suspected);
  EXPECT_NE(headline_text(a).find("look into"), std::string::npos) << headline_text(a);
  EXPECT_TRUE(a.findings[4].fires);  // still shown, just not first
}

TEST(Advisor, PrefixCacheOffWithSharedPrefixesIsTurnedOn) {
  EngineState s = healthy();
  s.config.prefix_cache = false;
  s.prefix = {};
  s.sharing = {40, 40 * 1000, 39 * 800, 39};  // 78 % shareable
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "prefix-cache");
  ASSERT_EQ(f.flags.size(), 1u);
  EXPECT_EQ(f.flags[0].first, "--prefix-cache");
  EXPECT_EQ(f.flags[0].second, "on");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_EQ(f.prediction->metric, Metric::kTtftMean);
  const double base = 0.020 + 0.002 * 4;  // the mean decode step
  EXPECT_NEAR(f.prediction->after, base + (0.08 - base) * (1 - 0.78), 1e-3);
}

// Issue 53's mutation audit: moving the threshold (`shareable >= 0.2`) to 0.02 passed every
// test, which only tried 78 %. With the cache off, a workload just under a fifth shareable is
// not worth a lever; one at or just over it is.
TEST(Advisor, PrefixCacheThresholdIsAFifthOfPromptTokens) {
  const auto prefix_finding = [](double shareable) {
    EngineState s = healthy();
    s.config.prefix_cache = false;
    s.prefix = {};
    const auto tokens = static_cast<uint64_t>(std::llround(40000 * shareable));
    s.sharing = {40, 40000, tokens, 39};
    const Advice a = run(s);
    for (const Finding& f : a.findings) {
      if (f.id == "prefix-cache") return f;
    }
    ADD_FAILURE() << "no prefix-cache finding:\n" << format_advice(a);
    return Finding{};
  };
  const Finding under = prefix_finding(0.15);
  EXPECT_FALSE(under.fires) << under.verdict;
  EXPECT_TRUE(under.flags.empty());
  EXPECT_NE(under.verdict.find("little sharing"), std::string::npos) << under.verdict;
  for (const double shareable : {0.2, 0.25}) {
    const Finding over = prefix_finding(shareable);
    EXPECT_TRUE(over.fires) << shareable << ": " << over.verdict;
    ASSERT_EQ(over.flags.size(), 1u) << shareable;
    EXPECT_EQ(over.flags[0].first, "--prefix-cache");
  }
}

TEST(Advisor, StaticBatchingWithVariedOutputsIsMadeContinuous) {
  EngineState s = healthy();
  s.config.batching = "static";
  s.step_totals.padding_rows = s.step_totals.decode_only.rows * 2 / 5;  // 40 % padding
  for (size_t i = 0; i < s.requests.size(); ++i)
    s.requests[i].completion_tokens = 16 + 60 * (i % 4);
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "continuous-batching");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_EQ(f.prediction->metric, Metric::kOutputThroughput);
  EXPECT_NEAR(f.prediction->after / f.prediction->before, 1 / 0.6, 0.01);
}

// A contiguous KV cache holding four whole contexts: 16 users, 4 rows decoding (3..5), 16
// would fit paged.
EngineState contiguous_with_waiting_users() {
  EngineState s = healthy();
  s.config.kv_layout = "contiguous";
  s.config.prefix_cache = false;
  s.sharing = {};
  s.config.kv_total_blocks = 4 * 2048 / 16;
  s.step_totals.max_waiting = 12;
  for (StepRecord& r : s.steps) {
    r.kv_reserved_positions = 2048 * r.sequences;
    r.kv_used_positions = 384 * r.sequences;
  }
  return s;
}

loadgen::RunResult sixteen_users() {
  loadgen::RunResult run;
  run.arrival.concurrency = 16;
  run.summary.output_throughput = 150;
  run.summary.completed = 40;
  for (int i = 0; i < 40; ++i) {
    loadgen::RequestRecord r;
    r.prompt_tokens = 256;
    r.output_tokens = 128;
    run.records.push_back(r);
  }
  return run;
}

TEST(Advisor, ContiguousKvWithManyUsersAndMemoryLeftIsPaged) {
  const EngineState s = contiguous_with_waiting_users();
  const loadgen::RunResult users = sixteen_users();
  const Finding& f = headline(run(s, &users));
  EXPECT_EQ(f.id, "paged-kv");
  EXPECT_EQ(f.question, 4);
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_GT(f.prediction->after, f.prediction->before);
}

TEST(Advisor, PagedKvIsPredictedByTheMeasuredRowCurve) {
  EngineState s = contiguous_with_waiting_users();
  // The run's decode steps took 28 ms at 4 rows (20 ms + 2 ms a row); the sweep timed the
  // forward pass at 13 ms there and 60 ms at 16 rows. The 15 ms the step spent beyond the
  // pass stays, the pass grows: 75 ms. (The fitted line would say 52 ms.) Decode is the only
  // work here: 4 times fewer steps of 75/28 the time.
  s.decode_curve = {384, {{1, 0.010}, {4, 0.013}, {16, 0.060}}};
  const loadgen::RunResult users = sixteen_users();
  const Finding& f = headline(run(s, &users));
  EXPECT_EQ(f.id, "paged-kv");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_NEAR(f.prediction->after / f.prediction->before, 1.0 / (0.25 * 0.075 / 0.028), 0.01);
  bool named = false;
  for (const std::string& e : f.evidence) named |= e.find("row sweep") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Advisor, TheRunsOwnForwardShareSaysWhatPartOfTheStepGrows) {
  // The steps recorded a quarter of their 28 ms in the forward pass (7 ms): that part grows
  // by the sweep's 60/13, the other 21 ms stay: 53.3 ms at 16 rows.
  EngineState s = contiguous_with_waiting_users();
  for (StepRecord& r : s.steps) r.forward_seconds = r.seconds / 4;
  s.decode_curve = {384, {{1, 0.010}, {4, 0.013}, {16, 0.060}}};
  const loadgen::RunResult users = sixteen_users();
  const Finding& f = headline(run(s, &users));
  EXPECT_EQ(f.id, "paged-kv");
  ASSERT_TRUE(f.prediction.has_value());
  const double step16 = 0.021 + 0.007 * 0.060 / 0.013;
  EXPECT_NEAR(f.prediction->after / f.prediction->before, 1.0 / (0.25 * step16 / 0.028), 0.01);
}

TEST(Advisor, MoreRowsAreNotAdvisedWhereDecodeIsBoundByCompute) {
  // The forward pass explains the whole 28 ms step at 4 rows and every row costs as much as
  // the first: 16 rows at once emit no more tokens a second.
  EngineState s = contiguous_with_waiting_users();
  s.decode_curve = {384, {{1, 0.007}, {2, 0.014}, {4, 0.028}, {8, 0.056}, {16, 0.112}}};
  const loadgen::RunResult users = sixteen_users();
  const Advice a = run(s, &users);
  for (const Finding& f : a.findings) {
    if (f.question != 4) continue;
    EXPECT_FALSE(f.fires) << f.verdict;
    EXPECT_NE(f.verdict.find("bound by compute"), std::string::npos) << f.verdict;
  }
  if (!a.healthy()) {
    EXPECT_NE(a.findings[static_cast<size_t>(a.headline)].question, 4);
  }
}

TEST(Advisor, HugeBlocksAreMadeSmaller) {
  EngineState s = healthy();
  s.config.kv_block_size = 1024;
  s.config.kv_total_blocks = 8;
  s.step_totals.max_waiting = 10;
  for (StepRecord& r : s.steps) {
    r.kv_reserved_positions = 1024 * r.sequences;
    r.kv_used_positions = 384 * r.sequences;
  }
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "kv-block-size");
  EXPECT_EQ(f.flags[0].second, "16");
}

TEST(Advisor, OneUserTpotBoundWithADraftGetsSpeculation) {
  EngineState s = healthy();
  s.steps.clear();
  s.step_totals = {};
  for (int i = 0; i < 100; ++i) {
    StepRecord r;
    r.sequences = r.decode_tokens = r.running = 1;
    r.seconds = 0.010;
    s.steps.push_back(r);
    s.step_totals.add(1, 0, 1, 0, 0, 1, 0, 2000, r.seconds);
  }
  for (RequestSummary& q : s.requests) {
    q.tpot = 0.010;
    q.lookup_tokens = 64;  // outputs that repeat: 40 of 64 tokens guessable
    q.lookup_hits = 40;
  }
  const Finding& f = headline(run(s, nullptr, "draft.gguf"));
  EXPECT_EQ(f.id, "speculative");
  EXPECT_EQ(f.flags[0].second, "draft");
  EXPECT_EQ(f.flags[1].second, "draft.gguf");
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_LT(f.prediction->after, f.prediction->before);
  // Without a draft model the lever is prompt lookup, its acceptance the measured share.
  const Finding ngram = headline(run(s));
  EXPECT_EQ(ngram.flags[0].second, "ngram");
  EXPECT_NE(ngram.effect.find("62 % acceptance"), std::string::npos) << ngram.effect;
}

// Speculation's preconditions, each measured: decode bound by reading the weights (not when
// they fit the cache, which question 1 says), and outputs that repeat (or a draft model).
TEST(Advisor, SpeculationNeedsBandwidthBoundDecodeAndRepeatingOutputs) {
  EngineState s = healthy();
  s.steps.clear();
  s.step_totals = {};
  for (int i = 0; i < 100; ++i) {
    StepRecord r;
    r.sequences = r.decode_tokens = r.running = 1;
    r.seconds = 0.010;
    s.steps.push_back(r);
    s.step_totals.add(1, 0, 1, 0, 0, 1, 0, 2000, r.seconds);
  }
  for (RequestSummary& q : s.requests) {
    q.tpot = 0.010;
    q.lookup_tokens = 64;
    q.lookup_hits = 12;  // 19 %: guesses would mostly fail
  }
  Advice a = run(s);
  EXPECT_TRUE(a.healthy()) << format_advice(a);
  EXPECT_NE(a.findings[4].verdict.find("repeat too little"), std::string::npos)
      << a.findings[4].verdict;
  for (RequestSummary& q : s.requests) q.lookup_hits = 48;
  EXPECT_EQ(headline(run(s)).id, "speculative");
  // The same with weights that fit the cache: no lever, and no "reads the weights" reason.
  s.model.weight_bytes = 20'000'000;
  s.model.parameters = 18'800'000;
  a = run(s);
  EXPECT_TRUE(a.healthy()) << format_advice(a);
  EXPECT_NE(a.findings[4].verdict.find("fit the"), std::string::npos) << a.findings[4].verdict;
  EXPECT_EQ(format_advice(a).find("reads all"), std::string::npos);
  EXPECT_EQ(format_advice(a).find("re-read"), std::string::npos);
}

// Nothing to change must say what is on and what is off.
TEST(Advisor, NothingToChangeNamesTheConfigurationAsItIs) {
  EngineState s = healthy();
  s.config.prefix_cache = false;
  s.prefix = {};
  s.sharing = {40, 40 * 256, 0, 0};
  s.config.batching = "static";  // outputs alike: nothing wasted
  const Advice a = run(s);
  ASSERT_TRUE(a.healthy()) << format_advice(a);
  const std::string h = headline_text(a);
  EXPECT_NE(h.find("batching static"), std::string::npos) << h;
  EXPECT_NE(h.find("prefix cache off"), std::string::npos) << h;
  EXPECT_EQ(h.find("continuous batching"), std::string::npos) << h;
  EXPECT_EQ(h.find("are on"), std::string::npos) << h;
}

// Steps as the engine records them: decode steps of 4 rows (20 + 2 ms a row) with one step
// of prompt work every fourth, chunks of `chunks` tokens in turn, each costing `overhead`
// beyond a decode step plus `per_token` a prompt token.
EngineState with_prompt_steps(std::vector<int> chunks, double overhead, double per_token) {
  EngineState s = healthy();
  s.steps.clear();
  s.step_totals = {};
  double t = 0;
  for (int i = 0; i < 240; ++i) {
    StepRecord r;
    r.sequences = r.running = 4;
    r.decode_tokens = 4;
    r.seconds = 0.028;
    if (i % 4 == 3) {
      r.prefill_tokens = chunks[static_cast<size_t>(i / 4) % chunks.size()];
      r.sequences = 5;
      r.seconds += overhead + per_token * r.prefill_tokens;
    }
    r.start = t;
    t += r.seconds;
    s.steps.push_back(r);
    s.step_totals.add(r.sequences, r.prefill_tokens, r.decode_tokens, 0, 0, r.running, 0, 2000,
                      r.seconds);
  }
  return s;
}

TEST(Advisor, LongPromptsStallingStreamsGetChunksFromTheStepCostCurve) {
  // 0.2 ms a prompt token, nothing more per step: a 512-token chunk stalls streams 102 ms.
  EngineState s = with_prompt_steps({512, 512, 300, 100}, 0.0, 0.0002);
  for (RequestSummary& q : s.requests) q.tpot = 0.0777;
  const Finding& f = headline(run(s));
  EXPECT_EQ(f.id, "prefill-chunk");
  EXPECT_EQ(f.question, 6);
  ASSERT_EQ(f.flags[0].first, "--prefill-chunk");
  // A chunk whose prompt tokens cost about a decode step (28 ms = 140 tokens), not smaller
  // than the step's fixed part (28 ms = 140 tokens): 256.
  EXPECT_EQ(f.flags[0].second, "256");
  EXPECT_NE(f.lever.find("--disaggregate"), std::string::npos) << f.lever;
  ASSERT_TRUE(f.prediction.has_value());
  EXPECT_EQ(f.prediction->metric, Metric::kItlP99);
  // Before: the measured p99 (a 512-token step, 130 ms); after: a decode p99 plus 256 tokens.
  EXPECT_NEAR(f.prediction->before, 0.028 + 0.1024, 1e-3);
  EXPECT_NEAR(f.prediction->after, 0.028 + 0.0512, 1e-3);
  // Without a client's record, ITL is the gaps between steps (28 ms at p50), named so; never
  // the TPOT (28 ms in healthy()'s requests: made distinct here).
  bool itl = false;
  for (const std::string& e : f.evidence) {
    if (e.find("inter-token latency") == std::string::npos) continue;
    itl = true;
    EXPECT_NE(e.find("p50 28.00 ms"), std::string::npos) << e;
    EXPECT_NE(e.find("from the engine's step times"), std::string::npos) << e;
  }
  EXPECT_TRUE(itl);
}

// Long documents: every chunk reads the whole document's KV, so a step with prompt work
// costs 120 ms more than a decode step whatever its size. Smaller chunks would only add
// steps: no small chunk is advised (the first version said 16).
TEST(Advisor, ChunksThatCannotShortenStallsAreNotAdvised) {
  const Advice a = run(with_prompt_steps({512, 512, 256, 384}, 0.120, 0.00005));
  const Finding& f = a.findings[5];
  EXPECT_TRUE(f.flags.empty()) << format_advice(a);
  EXPECT_NE(f.verdict.find("whatever its chunk"), std::string::npos) << f.verdict;
}

TEST(Advisor, ExhaustedKvWithPreemptionsGetsMoreKvQuantizedKvOrOffload) {
  EngineState s = healthy();
  s.counters.preemptions = 25;
  s.config.kv_total_blocks = 64;
  Finding f = headline(run(s));
  EXPECT_EQ(f.id, "kv-memory");
  EXPECT_EQ(f.flags[0].first, "--kv-memory");
  EXPECT_NE(f.lever.find("--kv-type q8_0: 1.9x"), std::string::npos) << f.lever;
  // No memory to spare: a quantized KV cache, and once it is quantized, offload.
  s.machine.memory_available = 1 << 20;
  f = headline(run(s));
  EXPECT_EQ(f.flags[0].first, "--kv-type");
  EXPECT_EQ(f.flags[0].second, "q8_0");
  s.config.kv_type = "q8_0";
  f = headline(run(s));
  EXPECT_EQ(f.flags[0].first, "--kv-offload-ram");
}

TEST(Advisor, OfflineWorkloadGoesToRapideBatch) {
  EngineState s = healthy();
  loadgen::RunResult r;
  r.arrival.rate = std::numeric_limits<double>::infinity();
  r.summary.completed = 40;
  const Finding& f = headline(run(s, &r));
  EXPECT_EQ(f.id, "offline-batch");
  EXPECT_NE(f.lever.find("rapide batch"), std::string::npos);
}

TEST(Advisor, QuestionsAreAskedInOrderAndTheFirstThatFiresLeads) {
  // Static batching and the prefix cache off at once: question 2 comes before 3.
  EngineState s = healthy();
  s.config.prefix_cache = false;
  s.sharing = {40, 40 * 1000, 39 * 800, 39};
  s.config.batching = "static";
  s.step_totals.padding_rows = s.step_totals.decode_only.rows / 2;
  const Advice a = run(s);
  EXPECT_EQ(headline(a).id, "prefix-cache");
  EXPECT_TRUE(a.findings[2].fires);
  const nlohmann::json j = advice_to_json(a);
  EXPECT_EQ(j["headline"], "prefix-cache");
  EXPECT_EQ(j["findings"][1]["prediction"]["metric"], "TTFT mean");
}

// "Verified" means within ±35 % of the prediction: the value B reached, not only the share of
// the predicted change (37 -> 8 preemptions is 78 % of a predicted 37 -> 0, and 8 is not 0).
TEST(Verification, VerifiedOnlyWithinThirtyFivePercentOfThePrediction) {
  Finding kv;
  kv.id = "kv-memory";
  kv.prediction = Prediction{Metric::kPreemptions, 37, 0};
  EXPECT_EQ(judge(kv, 37, 8).verdict, VerifyVerdict::kRightSign);
  EXPECT_EQ(judge(kv, 37, 0).verdict, VerifyVerdict::kVerified);
  Finding tpot;
  tpot.prediction = Prediction{Metric::kTpotP50, 0.010, 0.007};
  EXPECT_EQ(judge(tpot, 0.010, 0.0075).verdict, VerifyVerdict::kVerified);
  EXPECT_EQ(judge(tpot, 0.010, 0.005).verdict, VerifyVerdict::kRightSign);
  EXPECT_EQ(judge(tpot, 0.010, 0.012).verdict, VerifyVerdict::kNotVerified);
}

}  // namespace
}  // namespace rapide::advise
