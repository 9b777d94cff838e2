// Proposers for speculative decoding: who guesses the next tokens of a decoding sequence.
//
// The Scheduler decides how many guesses each decoding sequence may have this step (k, from
// the SpecController and what the budget, context and request leave) and asks its Proposer
// for all of them at once; guesses come back as plain token ids and are verified by the
// target model in the step's forward pass (engine/step.h). A proposer may keep state per KV
// sequence (a draft model's own KV cache): the scheduler tells it how far each sequence's
// verified tokens reach after every verification (rollback) and when a sequence's KV is gone
// (release: finished, aborted, preempted).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <unordered_map>

#include "base/thread_pool.h"
#include "engine/request.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

struct ProposalRequest {
  RequestId request_id = 0;
  int32_t kv_id = 0;
  std::span<const int32_t> tokens;  // the sequence so far (prompt + generated)
  int k = 0;                        // at most this many guesses
  // Sampled speculation (the request samples: temperature > 0): the sequence's draft sampler
  // (engine/sequence.h), at `generated` tokens. A proposer that samples its guesses draws
  // them with it and returns each guess's distribution q; the verification accepts with
  // min(1, p / q). Null, or a proposer that ignores it: guesses are deterministic (q one-hot).
  Sampler* sampler = nullptr;
  int generated = 0;
  std::vector<int32_t> guesses;  // filled by propose()
  // Filled by a sampling proposer, one per guess: the distribution it was drawn from.
  std::vector<std::vector<Candidate>> distributions;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual const char* name() const = 0;
  // Whether asking costs real work even when nothing comes back (a draft model's passes):
  // then an empty answer counts as a failed guess, so auto stops asking.
  virtual bool costly() const { return false; }
  virtual void propose(std::span<ProposalRequest> requests) = 0;
  // The sequence's first `positions` tokens are verified; anything guessed past them is not.
  virtual void rollback(int32_t /*kv_id*/, int /*positions*/) {}
  virtual void release(int32_t /*kv_id*/) {}
  // Prompt positions the proposer took from a prefix cache instead of computing them.
  virtual uint64_t cached_tokens() const { return 0; }
  // The forward passes of the last propose() as (rows, seconds): what a draft model costs,
  // for speculation's cost model. Empty for a proposer that runs no model.
  virtual std::span<const std::pair<int, double>> last_passes() const { return {}; }
};

// Prompt lookup (propose_ngram in engine/speculation.h): no state, no model.
class NgramProposer final : public Proposer {
 public:
  NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  const char* name() const override { return "ngram"; }
  void propose(std::span<ProposalRequest> requests) override;

 private:
  int min_n_, max_n_;
};

// A smaller model with the target's vocabulary, run by the engine thread with its own paged
// KV for the same sequences: each step it catches up on the sequence's verified tokens it has
// not seen (the whole prompt the first time, then the last accepted tokens) and then
// generates k guesses one token per forward pass, all proposing sequences in one batch.
// Greedy requests get the draft's argmax; sampling ones get tokens drawn by the request's
// draft sampler from the draft's processed distribution, returned with it (then a guess is
// accepted with probability 1 - TV(p, q) on average, far above a greedy guess's chance when
// the distributions are flat but alike, as a quantized copy's are).
class DraftModelProposer final : public Proposer {
 public:
  // Tokens a sequence may catch up on in one step (a long prompt is taken in pieces, and the
  // sequence proposes nothing until the draft has seen it whole).
  static constexpr int kMaxCatchUp = 512;

  // `blocks` KV blocks of `block_size` positions for the draft; the model and pool must
  // outlive the proposer. Greedy guessing stops at a token the draft gives less than
  // `min_confidence` probability (sampled guessing does not: a draft's confidence does not
  // bound min(1, p / q)). With `prefix_cache`, the draft's KV has a prefix cache of
  // its own (the same machinery as the target's): a new sequence whose prompt starts like an
  // earlier one attaches those blocks instead of prefilling them.
  DraftModelProposer(Model& draft, ThreadPool& pool, int32_t blocks, int block_size,
                     int max_context, KvType kv_type, double min_confidence, bool prefix_cache);
  ~DraftModelProposer() override;
  const char* name() const override { return "draft"; }
  bool costly() const override { return true; }
  void propose(std::span<ProposalRequest> requests) override;
  void rollback(int32_t kv_id, int positions) override;
  void release(int32_t kv_id) override;
  uint64_t cached_tokens() const override { return cached_tokens_; }
  std::span<const std::pair<int, double>> last_passes() const override { return passes_; }
  // Seconds spent in the draft model's forward passes so far.
  double draft_seconds() const { return draft_seconds_; }
  const PagedKvStore& kv() const { return *kv_; }

 private:
  // Draws the next guess of a sampled request from the draft's `logits` row with its draft
  // sampler, keeping q; false when nothing can be sampled.
  bool sample_guess(ProposalRequest& r, const float* logits, int vocab);
  // Attaches the cached blocks a new sequence's tokens start with.
  void attach_cached(const ProposalRequest& r);

  Model& model_;
  ThreadPool& pool_;
  std::unique_ptr<PagedKvStore> kv_;
  double min_confidence_;
  // Declared after kv_: the cache listens to its pool and must go first.
  std::unique_ptr<PrefixCache> cache_;
  struct CacheState {
    std::vector<uint64_t> hashes;  // of the sequence's verified full blocks
    int registered = 0;            // blocks registered with cache_
  };
  std::unordered_map<int32_t, CacheState> cache_state_;  // by KV sequence id
  uint64_t cached_tokens_ = 0;
  std::vector<std::pair<int, double>> passes_;  // of the last propose()
  Batch batch_;
  std::vector<float> scratch_;    // a logits row the draft sampler processes
  std::vector<int32_t> history_;  // a sequence's tokens and guesses, for the draft sampler
  double draft_seconds_ = 0.0;
};

// A draft model as the engine is given it (both must outlive the engine).
struct DraftModel {
  Model& model;
  const Tokenizer& tokenizer;
};

// Refuses a draft model whose vocabulary differs from the target's, naming the first
// differing token (or the sizes).
void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

}  // namespace rapide
