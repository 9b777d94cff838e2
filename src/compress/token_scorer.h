// The scoring model of prompt compression: one forward pass over [BOS, passage, question]
// gives each passage token its self-information -log p(token | the passage before it) and
// the question's log-likelihood given the passage (LongLLMLingua's relevance), in one go.
//
// Each passage is scored on its own, so a pass costs a passage's length of attention, not
// the whole context's. The scorer owns its Model (over a shared ModelFile) and KV cache, so
// it never races an engine using the same file; calls are serialized by the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::compress {

struct ScoredPassage {
  std::vector<int32_t> tokens;     // the passage's tokens (no BOS)
  std::vector<float> surprisal;    // per token, nats: -log p(token | BOS, tokens before it)
  double question_logprob = 0.0;   // log p(question | BOS, passage), nats, summed
  int question_tokens = 0;
};

class TokenScorer {
 public:
  TokenScorer(std::shared_ptr<const ModelFile> file, int threads);

  // Scores `passage` and, when `question` is not empty, the question after it.
  ScoredPassage score(std::string_view passage, std::string_view question);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Model& model() const { return model_; }
  // Measured cost of scoring: seconds per token over every pass so far (a short calibration
  // pass at construction gives the first figure).
  double seconds_per_token() const { return seconds_ / static_cast<double>(tokens_); }

 private:
  // log p(next token) for rows [0, n-1) of `ids`, fed from position 0.
  std::vector<float> token_logprobs(const std::vector<int32_t>& ids);

  std::shared_ptr<const ModelFile> file_;
  Model model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_;
  std::unique_ptr<ContiguousKvStore> kv_;  // grown to the longest pass
  double seconds_ = 0.0;
  int64_t tokens_ = 0;
};

}  // namespace rapide::compress
