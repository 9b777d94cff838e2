// Batches of training sequences cut from a token stream. Which windows a step reads is a
// function of (seed, step, micro-batch) alone, so a run resumed from a checkpoint at step s
// sees exactly the batches the uninterrupted run saw from step s on.
#pragma once

#include <cstdint>
#include <vector>

namespace rapide::train {

class TokenBatches {
 public:
  // bos >= 0 replaces each window's first token (as rapide perplexity starts its windows).
  // Throws kInvalidArgument when the stream is shorter than one window of seq + 1 tokens.
  TokenBatches(std::vector<int32_t> stream, int seq, int32_t bos, uint64_t seed);

  // batch windows of seq + 1 tokens (inputs are [0, seq), targets [1, seq]) into
  // out[batch][seq + 1].
  void fill(int64_t step, int micro, int batch, int32_t* out) const;
  int seq() const { return seq_; }
  int64_t size() const { return static_cast<int64_t>(stream_.size()); }

 private:
  std::vector<int32_t> stream_;
  int seq_;
  int32_t bos_;
  uint64_t seed_;
};

}  // namespace rapide::train
