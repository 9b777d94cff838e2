// Prefix caching and the KV offload tier under the real engine (stories260K): a hit must
// give exactly the tokens a miss gives, blocks shared by concurrent requests must outlive
// every user, eviction and preemption under a small KV budget must not change any output,
// the tier must serve what RAM no longer holds (and refuse corrupt files), and a
// one-token difference must be explained by a miss record. The KV pool is whole after each.
// With a quantized KV cache (q8_0) a hit gives exactly a miss's output with the same type,
// blocks round-trip through the tier, and one type's offloaded blocks never serve another.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

// Every request here must succeed.
Outcome collect_ok(EventQueue& queue) {
  Outcome o = collect(queue);
  EXPECT_TRUE(o.error.empty()) << o.error;
  return o;
}

struct Prompt {
  std::vector<int32_t> tokens;
  int max_tokens = 24;
  float temperature = 0.0f;
  uint64_t seed = 1;
};

EngineOptions options(bool prefix_cache, const std::string& kv_memory = "64MiB",
                      KvType kv_type = KvType::kF16) {
  EngineOptions o;
  o.kv_type = kv_type;
  o.threads = 2;
  o.kv_memory = kv_memory;
  o.max_context = 512;
  o.prefix_cache = prefix_cache;
  return o;
}

const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her red ball. One day, she saw a big dog under a tree. The dog was sad because "
    "it had lost its bone. Lily wanted to help the dog find the bone.";
const char* kQuestions[] = {" Where was the bone?",  " What did Lily do next?",
                            " Was the dog happy?",   " Who found the ball?",
                            " Why was the dog sad?", " What color was the ball?"};

class PrefixCacheEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    loaded_ = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  }
  std::vector<int32_t> encode(const std::string& text) const {
    return loaded_.tokenizer->encode(text, true);
  }
  Request request(const Prompt& p, std::shared_ptr<EventSink> sink) const {
    Request r;
    r.prompt = p.tokens;
    r.sampling.temperature = p.temperature;
    r.sampling.top_k = 40;
    r.sampling.seed = p.seed;
    r.sampling.max_tokens = p.max_tokens;
    r.sampling.ignore_eos = true;
    r.sink = std::move(sink);
    return r;
  }
  Outcome run_one(Engine& engine, const Prompt& p) const {
    auto q = std::make_shared<EventQueue>();
    engine.submit(request(p, q));
    return collect_ok(*q);
  }
  // One after the other.
  std::vector<Outcome> run_each(Engine& engine, const std::vector<Prompt>& prompts) const {
    std::vector<Outcome> out;
    for (const Prompt& p : prompts) out.push_back(run_one(engine, p));
    return out;
  }
  std::vector<Outcome> run_together(Engine& engine, const std::vector<Prompt>& prompts) const {
    std::vector<std::shared_ptr<EventQueue>> queues;
    for (const Prompt& p : prompts) {
      queues.push_back(std::make_shared<EventQueue>());
      engine.submit(request(p, queues.back()));
    }
    std::vector<Outcome> out;
    for (auto& q : queues) out.push_back(collect_ok(*q));
    return out;
  }
  // What each prompt gives alone with the cache off: the reference.
  std::vector<Outcome> reference(const std::vector<Prompt>& prompts,
                                 KvType kv_type = KvType::kF16) const {
    Engine engine(*loaded_.model, *loaded_.tokenizer, options(false, "64MiB", kv_type));
    std::vector<Outcome> out;
    for (const Prompt& p : prompts) out.push_back(run_one(engine, p));
    EXPECT_FALSE(engine.stats().prefix_cache_enabled);
    return out;
  }
  // Conversations that share the story, each with its own question.
  std::vector<Prompt> shared_prefix_prompts() const {
    std::vector<Prompt> prompts;
    int i = 0;
    for (const char* q : kQuestions) {
      Prompt p;
      p.tokens = encode(std::string(kStory) + q);
      p.max_tokens = 12 + 9 * i;
      p.temperature = i % 2 ? 0.0f : 0.8f;
      p.seed = 100 + i++;
      prompts.push_back(p);
    }
    return prompts;
  }
  // Distinct long prompts (no shared prefix beyond BOS).
  std::vector<Prompt> distinct_prompts(int n) const {
    std::vector<Prompt> prompts;
    for (int i = 0; i < n; ++i) {
      Prompt p;
      p.tokens = encode(std::string(kQuestions[i % 6]) + " " + std::to_string(i) + " " + kStory);
      p.max_tokens = 16;
      prompts.push_back(p);
    }
    return prompts;
  }
  static void expect_same(const std::vector<Outcome>& a, const std::vector<Outcome>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
      EXPECT_EQ(a[i].text, b[i].text) << "request " << i;
    }
  }
  // No request holds KV once everything finished (cached blocks are free, not used).
  static void expect_no_leaks(const Engine& engine) {
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.kv.used_blocks, 0);
    EXPECT_EQ(st.kv.sequences, 0);
  }
  LoadedForTest loaded_;
};

TEST_F(PrefixCacheEngineTest, HitGivesExactlyTheOutputOfAMiss) {
  const std::vector<Prompt> prompts = shared_prefix_prompts();
  const std::vector<Outcome> ref = reference(prompts);
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(true));
  std::vector<Outcome> first, second;
  for (const Prompt& p : prompts) first.push_back(run_one(engine, p));
  for (const Prompt& p : prompts) second.push_back(run_one(engine, p));
  expect_same(ref, first);
  expect_same(ref, second);
  const int bs = engine.options().kv_block_size;
  const int story_blocks = static_cast<int>(encode(kStory).size()) / bs;
  EXPECT_EQ(first[0].cached_prompt_tokens, 0);
  for (size_t i = 1; i < prompts.size(); ++i) {
    EXPECT_GE(first[i].cached_prompt_tokens, story_blocks * bs) << i;
  }
  // Again: the whole blocks, then the leading tokens of the block the first run left cached
  // after them (prompt tail + its first generated tokens), up to all but the last token.
  int all_but_last = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int length = static_cast<int>(prompts[i].tokens.size());
    EXPECT_GE(second[i].cached_prompt_tokens, (length - 1) / bs * bs) << i;
    EXPECT_LE(second[i].cached_prompt_tokens, length - 1) << i;
    all_but_last += second[i].cached_prompt_tokens == length - 1;
  }
  EXPECT_GT(all_but_last, 0) << "no prompt reused the leading tokens of a partial block";
  const EngineStats st = engine.stats();
  EXPECT_TRUE(st.prefix_cache_enabled);
  EXPECT_EQ(st.prefix_cache.queries, 2 * prompts.size());
  EXPECT_GT(st.prefix_cache.hit_rate(), 0.5);
  EXPECT_EQ(st.prefix_cache.prompt_tokens,
            st.prefix_cache.ram_hit_tokens + st.prefix_cache.computed_tokens);
  // Different questions after a shared story reuse all they can: not near misses.
  EXPECT_TRUE(st.recent_misses.empty()) << st.recent_misses[0].summary;
  expect_no_leaks(engine);
}

TEST_F(PrefixCacheEngineTest, QuantizedKvHitGivesExactlyTheOutputOfAMissWithTheSameType) {
  const std::vector<Prompt> prompts = shared_prefix_prompts();
  const std::vector<Outcome> ref = reference(prompts, KvType::kQ8_0);
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(true, "64MiB", KvType::kQ8_0));
  const std::vector<Outcome> first = run_each(engine, prompts);
  const std::vector<Outcome> second = run_each(engine, prompts);
  expect_same(ref, first);
  expect_same(ref, second);
  // Whole blocks shared, and leading slots of partial blocks copied (quantized codes and
  // scales both) on the second pass.
  int partial = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(first[i].cached_prompt_tokens, 0) << i;
    }
    partial += second[i].cached_prompt_tokens % engine.options().kv_block_size != 0;
  }
  EXPECT_GT(partial, 0);
  expect_no_leaks(engine);
}

TEST_F(PrefixCacheEngineTest, ConcurrentSharersGiveTheirOwnOutputsAndReleaseEverything) {
  const std::vector<Prompt> prompts = shared_prefix_prompts();
  const std::vector<Outcome> ref = reference(prompts);
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(true));
  run_one(engine, prompts[0]);  // the story is cached; all of them now share its blocks
  expect_same(ref, run_together(engine, prompts));
  // Again, while the first wave's blocks are shared by several running requests.
  expect_same(ref, run_together(engine, prompts));
  EXPECT_GT(engine.stats().prefix_cache.ram_hit_tokens, 0u);
  expect_no_leaks(engine);
}

TEST_F(PrefixCacheEngineTest, EvictionAndPreemptionUnderASmallBudgetChangeNothing) {
  std::vector<Prompt> prompts = shared_prefix_prompts();
  for (const Prompt& p : distinct_prompts(6)) prompts.push_back(p);
  const std::vector<Outcome> ref = reference(prompts);
  // 400 KiB = 40 blocks of 16 tokens (stories260K: 10 KiB a block): a few requests at once.
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(true, "400KiB"));
  expect_same(ref, run_together(engine, prompts));
  expect_same(ref, run_together(engine, prompts));
  const EngineStats st = engine.stats();
  EXPECT_GT(st.prefix_cache.evicted_blocks, 0u) << "the budget was meant to force eviction";
  EXPECT_GT(st.prefix_cache.ram_hit_tokens, 0u);
  expect_no_leaks(engine);
}

TEST_F(PrefixCacheEngineTest, OneTokenDifferenceInTheFirstBlockIsAFullMissWithARecord) {
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(true));
  Prompt a;
  a.tokens = encode(kStory);
  run_one(engine, a);
  Prompt b = a;
  const int at = 5;
  b.tokens[at] = a.tokens[at] == 100 ? 101 : 100;
  const Outcome miss = run_one(engine, b);
  EXPECT_EQ(miss.cached_prompt_tokens, 0);
  const EngineStats st = engine.stats();
  ASSERT_EQ(st.recent_misses.size(), 1u);
  const PrefixMissRecord& r = st.recent_misses.back();
  EXPECT_EQ(r.reused_tokens, 0);
  EXPECT_EQ(r.matched_tokens, at);
  EXPECT_EQ(r.divergent_position, at);
  EXPECT_EQ(r.prompt_tokens, static_cast<int>(b.tokens.size()));
  const std::string common =
      loaded_.tokenizer->decode(std::span<const int32_t>(a.tokens).first(at));
  EXPECT_EQ(r.same_characters, static_cast<int>(common.size()));  // ASCII story
  EXPECT_NE(r.prompt_text, r.cached_text);
  EXPECT_EQ(r.prompt_text.rfind(loaded_.tokenizer->token_to_piece(b.tokens[at]), 0), 0u)
      << r.prompt_text;
  EXPECT_NE(r.summary.find("same"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find(r.cached_text), std::string::npos) << r.summary;
  // An identical prompt is a hit, and no new record.
  const Outcome hit = run_one(engine, a);
  EXPECT_GT(hit.cached_prompt_tokens, 0);
  EXPECT_EQ(engine.stats().recent_misses.size(), 1u);
  expect_no_leaks(engine);
}

class OffloadEngineTest : public PrefixCacheEngineTest {
 protected:
  void SetUp() override {
    PrefixCacheEngineTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_offload_engine_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(OffloadEngineTest, TierServesPromptsThatNoLongerFitRam) {
  const std::vector<Prompt> prompts = distinct_prompts(6);
  const std::vector<Outcome> ref = reference(prompts);
  // 160 KiB = 16 blocks: about two of these prompts; the rest must go to the tier.
  EngineOptions o = options(true, "160KiB");
  o.kv_offload_ram = "4MiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  for (int round = 0; round < 2; ++round) {
    std::vector<Outcome> out;
    for (const Prompt& p : prompts) out.push_back(run_one(engine, p));
    expect_same(ref, out);
    if (round == 1) {
      for (const Outcome& x : out) EXPECT_GT(x.cached_prompt_tokens, 0);
    }
  }
  const PrefixCacheStats st = engine.stats().prefix_cache;
  EXPECT_GT(st.tier_hit_tokens, 0u);
  EXPECT_GT(st.offload.loaded_blocks, 0u);
  EXPECT_EQ(st.offload.bytes_in, st.offload.loaded_blocks * 10240u);
  EXPECT_EQ(st.offload.corrupt_blocks, 0u);
  expect_no_leaks(engine);
}

TEST_F(OffloadEngineTest, PreemptedSequencesResumeFromTheCacheUnchanged) {
  std::vector<Prompt> prompts = shared_prefix_prompts();
  for (Prompt& p : prompts) p.max_tokens += 40;
  const std::vector<Outcome> ref = reference(prompts);
  EngineOptions o = options(true, "240KiB");
  o.kv_offload_ram = "4MiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  expect_same(ref, run_together(engine, prompts));
  const EngineStats st = engine.stats();
  EXPECT_GT(st.preemptions, 0u) << "the budget was meant to force preemption";
  // Re-admitted sequences found their blocks (RAM or tier) instead of recomputing them all.
  EXPECT_GT(st.prefix_cache.ram_hit_tokens + st.prefix_cache.tier_hit_tokens, 0u);
  expect_no_leaks(engine);
}

TEST_F(OffloadEngineTest, CorruptOffloadFilesAreCountedAndRecomputed) {
  const std::vector<Prompt> prompts = distinct_prompts(6);
  const std::vector<Outcome> ref = reference(prompts);
  EngineOptions o = options(true, "160KiB");
  o.kv_offload_dir = dir_.string();
  o.kv_offload_size = "16MiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  std::vector<Outcome> out;
  for (const Prompt& p : prompts) out.push_back(run_one(engine, p));
  expect_same(ref, out);
  // Damage every offloaded file (one byte of payload each).
  int damaged = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir_)) {
    std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(-3, std::ios::end);
    const char c = 0x5a;
    s.write(&c, 1);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  out.clear();
  for (const Prompt& p : prompts) out.push_back(run_one(engine, p));
  expect_same(ref, out);
  const PrefixCacheStats st = engine.stats().prefix_cache;
  EXPECT_GT(st.offload.corrupt_blocks, 0u);
  expect_no_leaks(engine);
}

// q8_0 blocks go to a disk tier and come back unchanged; f16 files already in the same
// directory (another KV type, so another identity) are never loaded into the q8_0 cache.
TEST_F(OffloadEngineTest, QuantizedBlocksRoundTripAndNeverMixWithAnotherType) {
  const std::vector<Prompt> prompts = distinct_prompts(6);
  const std::vector<Outcome> ref = reference(prompts, KvType::kQ8_0);
  {
    EngineOptions f16 = options(true, "160KiB");
    f16.kv_offload_dir = dir_.string();
    f16.kv_offload_size = "16MiB";
    Engine engine(*loaded_.model, *loaded_.tokenizer, f16);
    run_each(engine, prompts);
    ASSERT_GT(engine.stats().prefix_cache.offload.stored_blocks, 0u);
  }
  // stories260K q8_0 blocks: 5 layers x 4 KV heads x K,V x 16 x (8 codes + 2 scale bytes).
  const uint64_t q8_block = 5 * 4 * 2 * 16 * (8 + 2);
  EngineOptions o = options(true, "100KiB", KvType::kQ8_0);  // 16 blocks, as f16's 160 KiB
  o.kv_offload_dir = dir_.string();
  o.kv_offload_size = "16MiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  expect_same(ref, run_each(engine, prompts));
  EXPECT_EQ(engine.stats().prefix_cache.offload.loaded_blocks, 0u) << "an f16 file was used";
  expect_same(ref, run_each(engine, prompts));
  const PrefixCacheStats st = engine.stats().prefix_cache;
  EXPECT_GT(st.tier_hit_tokens, 0u);
  EXPECT_GT(st.offload.loaded_blocks, 0u);
  EXPECT_EQ(st.offload.bytes_in, st.offload.loaded_blocks * q8_block);
  EXPECT_EQ(st.offload.corrupt_blocks, 0u);
  expect_no_leaks(engine);
}

}  // namespace
}  // namespace rapide::testing
