// Speculative decoding's decisions: what to propose and how many tokens.
//
// A proposer guesses the next k tokens of a decoding sequence; the target model scores the
// sequence's last token and the k guesses in one forward pass (k + 1 logits rows), and the
// OutputProcessor accepts the longest prefix the target agrees with plus one token of its
// own (greedy: equal to its argmax; sampling: Leviathan et al.'s rejection rule, so the output
// distribution is exactly the target's). Every accepted guess saves a sequential step.
//
// It pays only above a break-even acceptance, so with --spec-tokens auto the controller picks
// k per sequence from measured figures:
//   * acceptance: per sequence, the probability that a guess is accepted given the ones
//     before it were (successes / trials with exponential forgetting);
//   * step cost: seconds per step as a + b * rows, fitted on the engine's recent steps.
// With acceptance alpha, k guesses yield E(k) = (1 - alpha^(k+1)) / (1 - alpha) tokens per
// step; a step of R decoding rows that all speculate costs T + b * k * R instead of T, so k
// maximizes E(k) * T / (T + b * k * R);
// k = 0 (speculation off for the sequence) when no k beats plain decoding by the margin.
// Until decode steps of two sizes a quarter apart have been seen, b is not known from them; it is
// then taken from prefill steps (seconds per token of prompt chunks of kPriorMinTokens or more,
// where the cost is the rows' compute), so a batch whose steps are compute-bound does not start
// speculating on the belief that extra rows are free; without such a step, b = 0.
// A draft model's passes are a cost model of their own, D(R) = a' + b' R (seconds per pass of
// R rows; before its first pass, b' R with b' = b x the draft's share of the target's matrix
// parameters), so with a draft a step costs T + b k R + k D(R); its seconds are taken out of the
// step's before the step's own fit. A sequence that is off is probed again only if perfect
// guesses could pay at the current batch: a draft model's probe first catches up on every
// token it skipped.
// A sequence with speculation off re-probes with k = 1 after kReprobeSteps steps, then after
// twice as many each time the probe does not turn it back on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_options.h"
#include "engine/request.h"

namespace rapide {

// Prompt lookup, at most k guesses, one at a time: each follows the longest suffix (n from
// max_n down to min_n) of the sequence and the guesses so far that occurs earlier in the last
// kNgramLookupWindow tokens, and is the token that most often followed it there, the latest
// occurrence's of equals. Copying a passage that occurs once is the latest occurrence's
// continuation; text that loops, as a small or random model's greedy output does, is
// predicted by what usually comes next, and past the sequence's end. On synth100m's greedy
// output (the first 256 tokens, offline replay) 4 guesses per step gave 2.15 tokens per
// verification against 1.78 copying the latest occurrence's continuation.
constexpr int kNgramLookupWindow = 1024;  // a guess is one pass over at most this many tokens
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int k, int min_n, int max_n);

// How repetitive a finished sequence's output is, as prompt lookup sees it: of its last
// `max_outputs` generated tokens (tokens[prompt_length..]), how many propose_ngram would have
// guessed right as the first guess from the tokens before. The share is what --spec ngram
// can expect to be accepted (the advisor's precondition for it), measured with speculation
// off. At most max_outputs passes over kNgramLookupWindow tokens.
struct NgramLookupCount {
  int32_t tokens = 0;  // generated tokens looked at
  int32_t hits = 0;    // of those, guessed right
};
NgramLookupCount count_ngram_lookup_hits(std::span<const int32_t> tokens, int prompt_length,
                                         int min_n, int max_n, int max_outputs = 256);

// The step cost model: seconds = a + b * rows, least squares over the last kWindow steps.
class StepCostModel {
 public:
  static constexpr int kWindow = 64;
  void observe(int rows, double seconds);
  // Whether the fit rests on steps of different sizes (otherwise b is unknown).
  bool fitted() const;
  double intercept() const { return a_; }
  double per_row() const { return b_; }
  double predict(int rows) const { return a_ + b_ * rows; }
  size_t observations() const { return window_.size(); }
  // A prefill-only step of `tokens` prompt tokens: the per-row prior (see above).
  void observe_prefill(int tokens, double seconds);
  static constexpr int kPriorMinTokens = 32;
  // Seconds per row before a fit: the prefill prior (0 without one).
  double prior_per_row() const { return prior_b_; }

 private:
  void refit();
  std::vector<std::pair<int, double>> window_;
  size_t next_ = 0;
  double a_ = 0.0, b_ = 0.0;
  double prior_b_ = 0.0;
  bool fitted_ = false;
};

struct SpecDecision {
  int k = 0;
  double predicted_speedup = 1.0;  // E(k) * T / (T + b k) for the chosen k
};

class SpecController {
 public:
  static constexpr int kReprobeSteps = 32;  // the first probe; each failed one doubles it
  static constexpr int kMaxReprobeSteps = 1024;
  // A proposer that is not costly (prompt lookup) is probed every kCheapReprobeSteps steps
  // while off, without backing off: a failed probe costs one verification row at most, and
  // none when it has no guess. Backing off to 32+ steps left synth100m's greedy text (which
  // falls in and out of loops) unspeculated for 40-52 of 256 steps: TPOT 2.65 ms against
  // 2.34 probing every 4 (n-gram auto, off 3.73 ms).
  static constexpr int kCheapReprobeSteps = 4;
  // Speculate only when the model predicts 10 % or more: what it leaves out (proposing,
  // verifying in the sampler) is not free either.
  static constexpr double kMargin = 1.10;
  static constexpr double kForget = 0.9;  // weight of the past per verification
  static constexpr double kPriorAlpha = 0.6;
  static constexpr double kPerfectAlpha = 0.99;  // "always right", for the probe rule

  explicit SpecController(const SpecOptions& options) : options_(options) {}
  // Whether the proposer costs work even when it has no guess (Proposer::costly).
  void set_costly_proposer(bool costly) { costly_proposer_ = costly; }

  // How many tokens to propose for `id` in a step of `rows` decoding sequences: `tokens`
  // when it is >= 0 (a fixed k: --spec-tokens N or the request's own), else auto.
  SpecDecision choose(RequestId id, int rows, int tokens);
  // A verification of `proposed` guesses accepted `accepted` of them.
  void observe(RequestId id, int proposed, int accepted);
  void forget(RequestId id) { sequences_.erase(id); }
  StepCostModel& costs() { return costs_; }
  // The draft model's forward passes (rows = tokens fed): a draft-model proposer's k guesses
  // for R sequences cost k passes of R rows (the catch-up of skipped tokens comes on top).
  StepCostModel& draft_costs() { return draft_costs_; }
  // Before the draft's first pass its cost per row is taken as this ratio (its matrix
  // parameters over the target's) times the target's per-row cost.
  void set_draft_work_ratio(double ratio) { draft_work_ratio_ = ratio; }
  // Acceptance estimate of a sequence (the prior when unseen).
  double acceptance(RequestId id) const;

 private:
  struct PerSequence {
    double successes = 0.0;
    double trials = 0.0;
    int steps_off = 0;
    int reprobe_after = kReprobeSteps;
  };
  SpecOptions options_;
  StepCostModel costs_;
  StepCostModel draft_costs_;
  double draft_work_ratio_ = 0.0;
  bool costly_proposer_ = true;
  std::unordered_map<RequestId, PerSequence> sequences_;
};

// What speculation did, for EngineStats, /metrics and the reports.
struct SpecStats {
  uint64_t verifications = 0;  // sequence-steps that verified at least one guess
  uint64_t proposed = 0;       // guesses verified
  uint64_t accepted = 0;       // guesses accepted
  uint64_t emitted = 0;        // tokens those verifications emitted (accepted + 1 each)
  uint64_t off_decisions = 0;  // decode steps where auto chose k = 0 (below break-even)
  std::vector<uint64_t> accepted_histogram;  // [a]: verifications that accepted a guesses
  int last_k = 0;                            // the latest k chosen
  uint64_t proposer_cached_tokens = 0;       // prompt positions a draft took from its prefix cache
  double last_predicted_speedup = 1.0;

  double acceptance_rate() const {
    return proposed ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
  }
  double mean_accepted() const {
    return verifications ? static_cast<double>(accepted) / static_cast<double>(verifications) : 0.0;
  }
};

// Expected tokens per verification step with k guesses at acceptance alpha.
double expected_tokens(double alpha, int k);

}  // namespace rapide
