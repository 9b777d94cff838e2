#include "engine/speculation.h"

#include <algorithm>
#include <cmath>

namespace rapide {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int k, int min_n, int max_n) {
  min_n = std::max(1, min_n);
  if (k <= 0 || tokens.empty() || max_n < min_n) return {};
  // The text grows by each guess, so later guesses can follow a loop past the sequence's end.
  const size_t window = std::min(tokens.size(), static_cast<size_t>(kNgramLookupWindow));
  std::vector<int32_t> text(tokens.end() - static_cast<std::ptrdiff_t>(window), tokens.end());
  std::vector<int32_t> guesses;
  struct Hit {
    int agree;     // how many tokens up to this occurrence equal the text's last ones
    int32_t next;  // the token that followed it
  };
  struct Follower {
    int32_t token;
    int count;
  };
  std::vector<Hit> hits;  // latest occurrence first
  std::vector<Follower> followers;
  for (int g = 0; g < k; ++g) {
    const int length = static_cast<int>(text.size());
    // One pass from the latest position back over the earlier occurrences of the last token.
    hits.clear();
    int longest = 0;
    const int32_t last = text.back();
    for (int q = length - 2; q >= 0; --q) {
      if (text[static_cast<size_t>(q)] != last) continue;
      int m = 1;
      while (m < max_n && m <= q &&
             text[static_cast<size_t>(q - m)] == text[static_cast<size_t>(length - 1 - m)]) {
        ++m;
      }
      hits.push_back({m, text[static_cast<size_t>(q + 1)]});
      longest = std::max(longest, m);
    }
    if (longest < min_n) break;
    // The longest suffix that occurred, then its most frequent follower; of equals, the one
    // seen first (the latest occurrence).
    followers.clear();
    for (const Hit& h : hits) {
      if (h.agree < longest) continue;
      auto it = std::find_if(followers.begin(), followers.end(),
                             [&](const Follower& f) { return f.token == h.next; });
      if (it == followers.end()) {
        followers.push_back({h.next, 1});
      } else {
        ++it->count;
      }
    }
    const Follower* best = &followers.front();
    for (const Follower& f : followers) {
      if (f.count > best->count) best = &f;
    }
    guesses.push_back(best->token);
    text.push_back(best->token);
  }
  return guesses;
}

NgramLookupCount count_ngram_lookup_hits(std::span<const int32_t> tokens, int prompt_length,
                                         int min_n, int max_n, int max_outputs) {
  NgramLookupCount c;
  const int n = static_cast<int>(tokens.size());
  for (int t = std::max({prompt_length, n - max_outputs, 1}); t < n; ++t) {
    const std::vector<int32_t> guess =
        propose_ngram(tokens.first(static_cast<size_t>(t)), 1, min_n, max_n);
    c.tokens++;
    c.hits += !guess.empty() && guess[0] == tokens[static_cast<size_t>(t)] ? 1 : 0;
  }
  return c;
}

void StepCostModel::observe(int rows, double seconds) {
  if (window_.size() < kWindow) {
    window_.emplace_back(rows, seconds);
  } else {
    window_[next_] = {rows, seconds};
    next_ = (next_ + 1) % kWindow;
  }
  refit();
}

void StepCostModel::refit() {
  const double n = static_cast<double>(window_.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int lo = window_.empty() ? 0 : window_[0].first, hi = lo;
  for (const auto& [rows, seconds] : window_) {
    lo = std::min(lo, rows);
    hi = std::max(hi, rows);
    sx += rows;
    sy += seconds;
    sxx += static_cast<double>(rows) * rows;
    sxy += rows * seconds;
  }
  const double var = n * sxx - sx * sx;
  // Steps of one size say nothing about the per-row cost; a fit needs at least two sizes,
  // a quarter apart: a batch draining from 32 to 28 rows spans too little for the slope to
  // rise above the noise of step times.
  fitted_ = window_.size() >= 8 && var > 1e-9 * n * n && hi - lo >= std::max(1, hi / 4);
  if (!fitted_) {
    a_ = n > 0 ? sy / n : 0.0;
    b_ = 0.0;
    return;
  }
  b_ = std::max(0.0, (n * sxy - sx * sy) / var);
  a_ = std::max(0.0, (sy - b_ * sx) / n);
}

void StepCostModel::observe_prefill(int tokens, double seconds) {
  if (tokens < kPriorMinTokens || seconds <= 0.0) return;
  const double per_token = seconds / tokens;
  // The latest chunks weigh most: the machine's speed drifts.
  prior_b_ = prior_b_ > 0.0 ? 0.75 * prior_b_ + 0.25 * per_token : per_token;
}

bool StepCostModel::fitted() const {
  return fitted_;
}

double expected_tokens(double alpha, int k) {
  if (alpha >= 1.0) return k + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

double SpecController::acceptance(RequestId id) const {
  const auto it = sequences_.find(id);
  if (it == sequences_.end() || it->second.trials < 1.0) return kPriorAlpha;
  // Smoothed towards the prior by one trial, so one rejection does not read as alpha = 0.
  return (it->second.successes + kPriorAlpha) / (it->second.trials + 1.0);
}

SpecDecision SpecController::choose(RequestId id, int rows, int tokens) {
  if (options_.mode == SpecMode::kOff) return {};
  if (tokens >= 0) return {tokens, 1.0};
  const double alpha = acceptance(id);
  // Assume every decoding sequence of the step speculates alike: a step of `rows` decodes
  // then costs T + b * k * rows for rows * E(k) tokens. In a small batch (memory-bound
  // steps, b small) that pays; in a large, compute-bound one the extra rows cost what they
  // save and no k wins.
  rows = std::max(1, rows);
  const double t = costs_.predict(rows);
  const double b = costs_.fitted() ? costs_.per_row() : costs_.prior_per_row();
  const double d =
      draft_costs_.observations() > 0 ? draft_costs_.predict(rows) : draft_work_ratio_ * b * rows;
  auto best_k = [&](double a) {
    SpecDecision best;
    for (int k = 1; k <= options_.max_tokens; ++k) {
      const double cost = t + b * k * rows + k * d;
      const double speedup = t > 0 ? expected_tokens(a, k) * t / cost : 1.0;
      if (speedup > best.predicted_speedup) best = {k, speedup};
    }
    return best;
  };
  const SpecDecision best = best_k(alpha);
  PerSequence& s = sequences_[id];
  if (best.predicted_speedup < kMargin) {
    // Not even guesses that are always right would pay at this batch: no probe either.
    if (best_k(kPerfectAlpha).predicted_speedup < kMargin) return {};
    // Below break-even: plain decoding, with a probe now and then so a sequence whose text
    // turned predictable (a quote, a list) can turn speculation back on. A draft model's
    // probes grow rarer while they keep failing: each first catches up on every token it
    // skipped, which is not free.
    if (++s.steps_off < (costly_proposer_ ? s.reprobe_after : kCheapReprobeSteps)) return {};
    s.steps_off = 0;
    s.reprobe_after = std::min(s.reprobe_after * 2, kMaxReprobeSteps);
    return {1, best.predicted_speedup};
  }
  s.steps_off = 0;
  s.reprobe_after = kReprobeSteps;
  return best;
}

void SpecController::observe(RequestId id, int proposed, int accepted) {
  if (proposed <= 0) return;
  PerSequence& s = sequences_[id];
  // Guesses examined: the accepted ones and the first rejected one (if any).
  const int trials = std::min(proposed, accepted + 1);
  s.successes = s.successes * kForget + accepted;
  s.trials = s.trials * kForget + trials;
}

}  // namespace rapide
