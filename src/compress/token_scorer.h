// The scoring model of prompt compression: a forward pass over [BOS, passage] gives each
// passage token its self-information -log p(token | the passage before it); the question,
// run after the passage (and a blank line), gives its log-likelihood given the passage
// (LongLLMLingua's relevance).
//
// Each passage is scored on its own, so a pass costs a passage's length of attention, not
// the whole context's. RAG corpora send the same passages again and again, so a passage's
// tokens, self-information and KV cache are kept (least recently used first out, within
// `cache_bytes`): a passage seen before costs only the question's tokens. The question
// always runs as its own pass after the passage's cache, so a cached and a fresh passage
// give the same figures.
//
// The scorer owns its Model (over a shared ModelFile), so it never races an engine using the
// same file; calls must be serialized by the caller.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::compress {

struct ScoredPassage {
  std::vector<int32_t> tokens;    // the passage's tokens (no BOS)
  std::vector<float> surprisal;   // per token, nats: -log p(token | BOS, tokens before it)
  double question_logprob = 0.0;  // log p(question | BOS, passage, blank line), nats, summed
  int question_tokens = 0;
};

// Default memory for cached passages (their KV caches, mostly).
inline constexpr size_t kDefaultScoreCacheBytes = size_t{64} << 20;

class TokenScorer {
 public:
  TokenScorer(std::shared_ptr<const ModelFile> file, int threads,
              size_t cache_bytes = kDefaultScoreCacheBytes);

  // Scores `passage` and, when `question` is not empty, the question after it.
  ScoredPassage score(std::string_view passage, std::string_view question);
  // Whether score(passage, ...) would find the passage cached.
  bool cached(std::string_view passage) const;
  // Forgets every cached passage (benchmarks measure cold scoring with it).
  void clear_cache();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Model& model() const { return model_; }
  // Measured cost of scoring: seconds per token run, over every pass so far (a short
  // calibration pass at construction gives the first figure).
  double seconds_per_token() const { return seconds_ / static_cast<double>(tokens_); }

 private:
  struct Entry {
    std::vector<int32_t> ids;  // [BOS,] passage
    std::vector<float> surprisal;
    std::unique_ptr<ContiguousKvStore> kv;  // the passage's positions, then room to ask
    std::list<std::string>::iterator lru;
  };
  // Feeds ids[from, n) at their positions into `kv`; returns log p(ids[p + 1]) for p in
  // [from, n - 1).
  std::vector<float> run(const std::vector<int32_t>& ids, int from, ContiguousKvStore& kv);
  Entry& passage_entry(std::string_view passage, int room);

  std::shared_ptr<const ModelFile> file_;
  Model model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_;
  size_t cache_bytes_;
  size_t used_bytes_ = 0;
  std::unordered_map<std::string, Entry> cache_;
  std::list<std::string> lru_;  // most recent first
  double seconds_ = 0.0;
  int64_t tokens_ = 0;
};

}  // namespace rapide::compress
