// LoRA adapters through the engine: a request's adapter reaches every position it runs
// (prefill chunks, decode steps, batched with other adapters' requests), and the prefix cache
// keeps each adapter's K/V to itself: the same prompt under two adapters never hits across.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/engine.h"
#include "golden/llamacpp_reference.h"
#include "lora_test_util.h"
#include "unit/engine/engine_outcome.h"

namespace rapide::testing {
namespace {

EngineOptions options(bool prefix_cache) {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "16MiB";
  o.max_context = 256;
  o.prefix_cache = prefix_cache;
  o.prefill_chunk = 24;  // prompts of 64 run in 3 chunks
  return o;
}

class LoraEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kBaseModel);
    t_ = load_for_test(shared_path(kBaseModel));
    a_ = add_adapter(t_, "a", lora_path("adapters/lora-a.gguf"), 1.0f);
    b_ = add_adapter(t_, "b", lora_path("adapters/peft-lora-b"), 1.0f);
    half_ = add_adapter(t_, "a-half", lora_path("adapters/lora-a.gguf"), 0.5f);
    for (const ReferenceSequence& s : read_reference_sequences(shared_path(kTokens))) {
      if (s.name == "story64") prompt_ = s.tokens;
    }
    ASSERT_EQ(prompt_.size(), 64u);
  }
  Request request(int32_t adapter, std::shared_ptr<EventSink> sink) const {
    Request r;
    r.prompt = prompt_;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 16;
    r.sampling.ignore_eos = true;
    r.adapter = adapter;
    r.sink = std::move(sink);
    return r;
  }
  Outcome run(Engine& engine, int32_t adapter) const {
    auto q = std::make_shared<EventQueue>();
    engine.submit(request(adapter, q));
    Outcome o = collect(*q);
    EXPECT_TRUE(o.error.empty()) << o.error;
    return o;
  }
  // Greedy straight on the model: the prompt as one batch, then one token per step.
  std::vector<int32_t> direct_greedy(int32_t adapter, int n) {
    Model& model = *t_.model;
    const int vocab = model.config().vocab_size;
    ContiguousKvStore kv(model.config(), 1, static_cast<int>(prompt_.size()) + n);
    Batch batch;
    for (size_t p = 0; p < prompt_.size(); ++p) {
      batch.add(prompt_[p], 0, static_cast<int>(p), p + 1 == prompt_.size(), adapter);
    }
    std::vector<int32_t> out;
    for (int step = 0; step < n; ++step) {
      const std::span<const float> logits = model.forward(batch, kv, pool_);
      out.push_back(top_two(logits.data(), vocab).best);
      batch.clear();
      batch.add(out.back(), 0, static_cast<int>(prompt_.size()) + step, true, adapter);
    }
    return out;
  }
  LoadedForTest t_;
  int a_ = -1, b_ = -1, half_ = -1;
  std::vector<int32_t> prompt_;
  ThreadPool pool_{2};
};

// Requests of three adapters and of the base, submitted together (their chunks and decode
// steps share passes), each get the tokens greedy decoding on the model gives with that
// adapter; and the adapters change the output.
TEST_F(LoraEngine, RequestsRunWithTheirAdapterInSharedSteps) {
  Engine engine(*t_.model, *t_.tokenizer, options(false));
  std::vector<std::shared_ptr<EventQueue>> queues;
  const std::vector<int32_t> adapters = {kBaseAdapter, a_, b_, half_, a_};
  for (const int32_t adapter : adapters) {
    queues.push_back(std::make_shared<EventQueue>());
    engine.submit(request(adapter, queues.back()));
  }
  std::vector<std::vector<int32_t>> got;
  for (auto& q : queues) got.push_back(collect(*q).tokens);
  for (size_t i = 0; i < adapters.size(); ++i) {
    EXPECT_EQ(got[i], direct_greedy(adapters[i], 16)) << "adapter " << adapters[i];
  }
  EXPECT_NE(got[0], got[1]);
  EXPECT_NE(got[1], got[3]);
  EXPECT_EQ(got[1], got[4]);
}

// One prompt under the base, two adapters and one adapter at another scale: each first run
// computes the whole prompt (no hit from another chain), each repeat hits its own chain's
// blocks, and every run gives what a cache-less engine gives.
TEST_F(LoraEngine, PrefixCacheNeverServesOneAdaptersKvToAnother) {
  std::vector<Outcome> reference;
  {
    Engine plain(*t_.model, *t_.tokenizer, options(false));
    for (const int32_t adapter : {kBaseAdapter, a_, b_, half_}) {
      reference.push_back(run(plain, adapter));
    }
  }
  Engine engine(*t_.model, *t_.tokenizer, options(true));
  int i = 0;
  for (const int32_t adapter : {kBaseAdapter, a_, b_, half_}) {
    const Outcome first = run(engine, adapter);
    EXPECT_EQ(first.cached_prompt_tokens, 0) << "adapter " << adapter << " hit another's K/V";
    EXPECT_EQ(first.tokens, reference[i].tokens) << "adapter " << adapter;
    const Outcome again = run(engine, adapter);
    EXPECT_GE(again.cached_prompt_tokens, 48) << "adapter " << adapter;
    EXPECT_EQ(again.tokens, reference[i].tokens) << "adapter " << adapter;
    ++i;
  }
}

TEST_F(LoraEngine, AnUnknownAdapterIsRefusedAtSubmit) {
  Engine engine(*t_.model, *t_.tokenizer, options(false));
  try {
    engine.submit(request(7, std::make_shared<EventQueue>()));
    ADD_FAILURE() << "adapter 7 of 3 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
}

}  // namespace
}  // namespace rapide::testing
