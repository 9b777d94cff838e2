// What the reference-logits tests (llamacpp_logits_test, llamacpp2_logits_test,
// deepseek2_logits_test) share: one sequence's logits at every position from an empty cache,
// a row's distance to the reference row, the greedy.tsv rows, and llama-perplexity's
// chunked perplexity (shared/reference/llamacpp README 7).
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/greedy_runner.h"
#include "golden/llamacpp_reference.h"

namespace rapide::testing {

struct RowStats {
  float max_abs = 0;
  double mean_abs = 0;
};

inline RowStats compare_row(const float* ours, const float* theirs, int vocab) {
  RowStats s;
  for (int v = 0; v < vocab; ++v) {
    const float d = std::fabs(ours[v] - theirs[v]);
    s.max_abs = std::max(s.max_abs, d);
    s.mean_abs += d;
  }
  s.mean_abs /= vocab;
  return s;
}

// One sequence through the model as a single batch with logits on every row, as the
// references were made (README 5).
inline std::vector<float> all_logits(Model& model, const std::vector<int32_t>& tokens,
                                     ThreadPool& pool) {
  ContiguousKvStore kv(model.config(), 1, static_cast<int>(tokens.size()));
  Batch batch;
  for (size_t p = 0; p < tokens.size(); ++p) batch.add(tokens[p], 0, static_cast<int>(p), true);
  const std::span<const float> logits = model.forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

// greedy.tsv: a 64-token greedy continuation of one prompt, with the top-1/top-2 margin of
// each step.
struct GreedyReferenceRow {
  std::vector<int32_t> prompt, continuation;
  std::vector<float> margins;
};

inline GreedyReferenceRow read_greedy_row(const std::string& path, const std::string& model) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string f; std::getline(split, f, '\t');) fields.push_back(f);
    if (fields.size() != 4 || fields[0] != model) continue;
    GreedyReferenceRow row;
    std::istringstream a(fields[1]), b(fields[2]), m(fields[3]);
    for (int32_t id; a >> id;) row.prompt.push_back(id);
    for (int32_t id; b >> id;) row.continuation.push_back(id);
    for (float x; m >> x;) row.margins.push_back(x);
    return row;
  }
  throw std::runtime_error(path + " has no row for " + model);
}

// Perplexity as llama-perplexity -c `ctx` computes it: ctx-token chunks of the BOS-prefixed
// text, each chunk's first token replaced by BOS (1), the logits at positions ctx/2..ctx-2
// scoring the next token. `scored` receives the number of scored tokens.
inline double chunked_perplexity(Model& model, const std::vector<int32_t>& tokens, int ctx,
                                 ThreadPool& pool, int* scored) {
  const int vocab = model.config().vocab_size;
  double nll = 0;
  int count = 0;
  for (size_t base = 0; base + ctx <= tokens.size(); base += ctx) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(base),
                               tokens.begin() + static_cast<std::ptrdiff_t>(base + ctx));
    chunk[0] = 1;  // BOS
    const std::vector<float> logits = all_logits(model, chunk, pool);
    for (int p = ctx / 2; p < ctx - 1; ++p) {
      const float* row = logits.data() + static_cast<size_t>(p) * vocab;
      const float max_logit = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - max_logit));
      nll -= row[chunk[p + 1]] - max_logit - std::log(sum);
      ++count;
    }
  }
  *scored = count;
  return std::exp(nll / count);
}

// Batch invariance: the sequences in one batch, their prompts in 16-position chunks round
// robin (experts see rows of several sequences, attention several sequences' positions),
// give each row bit for bit what the sequence gives alone. `what` names the model.
inline void expect_chunked_batches_match_alone(Model& model,
                                               const std::vector<ReferenceSequence>& seqs,
                                               ThreadPool& pool, const std::string& what) {
  const int vocab = model.config().vocab_size;
  std::vector<std::vector<float>> alone;
  size_t longest = 0;
  for (const ReferenceSequence& seq : seqs) {
    alone.push_back(all_logits(model, seq.tokens, pool));
    longest = std::max(longest, seq.tokens.size());
  }
  ContiguousKvStore kv(model.config(), static_cast<int>(seqs.size()), static_cast<int>(longest));
  for (size_t start = 0; start < longest; start += 16) {
    Batch batch;
    std::vector<std::pair<size_t, size_t>> rows;  // (sequence, position)
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (size_t p = start; p < std::min(start + 16, seqs[s].tokens.size()); ++p) {
        batch.add(seqs[s].tokens[p], static_cast<int>(s), static_cast<int>(p), true);
        rows.emplace_back(s, p);
      }
    }
    const std::span<const float> logits = model.forward(batch, kv, pool);
    ASSERT_EQ(logits.size(), rows.size() * vocab);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* ours = logits.data() + r * vocab;
      const float* ref = alone[rows[r].first].data() + rows[r].second * vocab;
      ASSERT_TRUE(std::equal(ours, ours + vocab, ref))
          << what << " " << seqs[rows[r].first].name << " position " << rows[r].second;
    }
  }
}

}  // namespace rapide::testing
