// Every architecture of shared/reference/llamacpp2 under the real engine, with what the
// engine adds around Model::forward: paged KV blocks, continuous batching of several
// requests, the prefix cache (a hit gives exactly what a miss gives), a quantized (q8_0) KV
// cache (a hit gives what a miss of the same type gives) and n-gram speculation (accepted
// guesses give exactly the tokens of plain decoding). The oracle is the model run directly
// on a contiguous cache, one token a step (checked against the references by
// llamacpp2_logits_test, deepseek2_logits_test: deepseek2's KV blocks hold MLA's latent
// rows). The Hugging Face folders carry no vocabulary: they run with
// stories260K's 512-token tokenizer, the vocabulary their token ids come from (README 4).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "golden/llamacpp_reference.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const std::string kDir = "reference/llamacpp2/";
const char* kModels[] = {"models/llama3-rope-F32.gguf",
                         "models/olmo2-F32.gguf",
                         "models/granite-F32.gguf",
                         "models/cohere2-F32.gguf",
                         "models/gemma-F32.gguf",
                         "models/deepseek2-F32.gguf",
                         "hf/qwen3",
                         "hf/gemma3"};

EngineOptions options(bool prefix_cache, KvType kv_type, SpecMode spec = SpecMode::kOff) {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "16MiB";
  o.max_context = 256;
  o.kv_block_size = 16;
  o.prefix_cache = prefix_cache;
  o.kv_type = kv_type;
  o.spec.mode = spec;
  return o;
}

// Prompts that share their first 40 tokens (long200's start), then differ.
std::vector<std::vector<int32_t>> prompts() {
  const std::vector<ReferenceSequence> seqs =
      read_reference_sequences(shared_path(kDir + "tokens.txt"));
  const std::vector<int32_t>& text = seqs.at(1).tokens;
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p(text.begin(), text.begin() + 40);
    p.insert(p.end(), text.begin() + 60 + 10 * i, text.begin() + 66 + 10 * i);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int32_t> direct_greedy(Model& model, const std::vector<int32_t>& prompt, int n) {
  ThreadPool pool(2);
  ContiguousKvStore kv(model.config(), 1, static_cast<int>(prompt.size()) + n);
  Batch batch;
  for (size_t p = 0; p < prompt.size(); ++p) {
    batch.add(prompt[p], 0, static_cast<int>(p), p + 1 == prompt.size());
  }
  std::vector<int32_t> out;
  int pos = static_cast<int>(prompt.size());
  for (int i = 0; i < n; ++i) {
    const std::span<const float> logits = model.forward(batch, kv, pool);
    const int32_t next = top_two(logits.data(), model.config().vocab_size).best;
    out.push_back(next);
    batch.clear();
    batch.add(next, 0, pos++, true);
  }
  return out;
}

std::vector<std::vector<int32_t>> run_together(Engine& engine,
                                               const std::vector<std::vector<int32_t>>& ps, int n) {
  std::vector<std::shared_ptr<EventQueue>> queues;
  for (const std::vector<int32_t>& p : ps) {
    Request r;
    r.prompt = p;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = n;
    r.sampling.ignore_eos = true;
    queues.push_back(std::make_shared<EventQueue>());
    r.sink = queues.back();
    engine.submit(std::move(r));
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& q : queues) {
    const Outcome o = collect(*q);
    EXPECT_TRUE(o.error.empty()) << o.error;
    out.push_back(o.tokens);
  }
  return out;
}

class ArchitecturesEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchitecturesEngine, PagedBatchedCachedQuantizedAndSpeculativeRunsAgree) {
  const std::string path = kDir + GetParam();
  RAPIDE_REQUIRE_SHARED(path);
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  LoadedForTest t = load_for_test(shared_path(path));
  LoadedForTest vocab = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  const Tokenizer& tokenizer = t.tokenizer ? *t.tokenizer : *vocab.tokenizer;
  constexpr int kNew = 24;
  const std::vector<std::vector<int32_t>> ps = prompts();
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : ps) want.push_back(direct_greedy(*t.model, p, kNew));

  {  // F16 paged KV with the prefix cache: a first round (misses), then hits.
    Engine engine(*t.model, tokenizer, options(true, KvType::kF16));
    EXPECT_EQ(run_together(engine, ps, kNew), want) << "batched, cache cold";
    EXPECT_EQ(run_together(engine, ps, kNew), want) << "batched, cache warm";
    EXPECT_GT(engine.stats().prefix_cache.ram_hit_tokens, 0u);
  }
  {  // n-gram speculation changes no token.
    Engine engine(*t.model, tokenizer, options(false, KvType::kF16, SpecMode::kNgram));
    EXPECT_EQ(run_together(engine, ps, kNew), want) << "n-gram speculation";
  }
  // q8_0 KV: its own numbers, the same with and without cache hits.
  Engine miss(*t.model, tokenizer, options(false, KvType::kQ8_0));
  const std::vector<std::vector<int32_t>> q8 = run_together(miss, ps, kNew);
  Engine hit(*t.model, tokenizer, options(true, KvType::kQ8_0));
  run_together(hit, ps, kNew);
  EXPECT_EQ(run_together(hit, ps, kNew), q8) << "q8_0 KV, cache warm";
  EXPECT_GT(hit.stats().prefix_cache.ram_hit_tokens, 0u);
}

INSTANTIATE_TEST_SUITE_P(Reference, ArchitecturesEngine, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(name.find('/') + 1);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace rapide::testing
