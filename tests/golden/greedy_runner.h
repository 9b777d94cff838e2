// Greedy generation straight on Model (no engine), for golden and invariance tests.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::testing {

struct LoadedForTest {
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline LoadedForTest load_for_test(const std::string& path, const LoadOptions& options = {}) {
  LoadedForTest t;
  t.file = std::make_shared<const ModelFile>(load_model(path, options));
  t.model = std::make_unique<Model>(t.file);
  // Reference folders without a vocabulary (shared/reference/llamacpp2/hf) run on token ids.
  if (t.file->tokenizer.kind != TokenizerKind::kNone) {
    t.tokenizer = Tokenizer::create(t.file->tokenizer);
  }
  return t;
}

// The argmax (lowest id on ties) and the gap to the runner-up.
struct TopTwo {
  int32_t best = 0;
  int32_t second = 0;
  float margin = 0.0f;
};

inline TopTwo top_two(const float* logits, int vocab) {
  TopTwo t;
  float best = -1e30f, second = -1e30f;
  for (int i = 0; i < vocab; ++i) {
    if (logits[i] > best) {
      second = best;
      t.second = t.best;
      best = logits[i];
      t.best = i;
    } else if (logits[i] > second) {
      second = logits[i];
      t.second = i;
    }
  }
  t.margin = best - second;
  return t;
}

struct GreedyResult {
  std::vector<int32_t> tokens;  // generated only
  std::vector<TopTwo> steps;    // per generated token
};

// Feeds the prompt in chunks of `chunk` tokens (all at once when 0), then decodes n tokens.
inline GreedyResult greedy(Model& model, const std::vector<int32_t>& prompt, int n,
                           ThreadPool& pool, int chunk = 0, KvType kv_type = KvType::kF16) {
  const int vocab = model.config().vocab_size;
  ContiguousKvStore kv(model.config(), 1, static_cast<int>(prompt.size()) + n + 1, kv_type);
  GreedyResult result;
  Batch batch;
  const int step = chunk > 0 ? chunk : static_cast<int>(prompt.size());
  std::span<const float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += step) {
    batch.clear();
    const size_t end = std::min(prompt.size(), begin + step);
    for (size_t p = begin; p < end; ++p) {
      batch.add(prompt[p], 0, static_cast<int>(p), p + 1 == prompt.size());
    }
    logits = model.forward(batch, kv, pool);
  }
  int pos = static_cast<int>(prompt.size());
  for (int i = 0; i < n; ++i) {
    TopTwo t = top_two(logits.data(), vocab);
    result.tokens.push_back(t.best);
    result.steps.push_back(t);
    if (i + 1 == n) break;
    batch.clear();
    batch.add(t.best, 0, pos++, true);
    logits = model.forward(batch, kv, pool);
  }
  return result;
}

}  // namespace rapide::testing
