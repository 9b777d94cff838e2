// Held-out data of a training run (rapide prune --heal-steps, rapide distill): the end of the
// token stream is kept out of training and scored while the run goes on, so a run that learns
// its small text by heart is seen (training loss falls, held-out loss rises) and stopped with
// its best weights (train/trainer.h). Issue 53: healing a pruned model on 1,773 tokens for 200
// steps ended with a held-out perplexity of 652 (121 before pruning), and nothing said so.
//
// The score is the mean next-token cross-entropy over every position of non-overlapping
// windows of seq + 1 tokens, each starting with BOS as training windows do
// (train/token_batches.h); perplexity is its exp. It is not `rapide perplexity`'s figure
// (which scores the second half of longer windows), but it is the same on every model a run
// compares: teacher, student before training, student after.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "train/train_model.h"

namespace rapide::train {

struct HeldOutSplit {
  std::vector<int32_t> train;     // the first tokens of the stream
  std::vector<int32_t> held_out;  // the last ones; no position is in both
};

// Splits off the last `fraction` of `stream`, and at least one window of seq + 1 tokens (0:
// nothing is held out). Throws kInvalidArgument for a fraction outside [0, 0.9], or when the
// stream cannot give one window of seq + 1 tokens to each side (the message names --holdout).
HeldOutSplit split_held_out(std::vector<int32_t> stream, double fraction, int seq);

class HeldOutSet {
 public:
  // Scoring costs a forward pass per window: beyond this many, windows are taken evenly
  // spread over the held-out tokens (they stay out of training all the same).
  static constexpr int kMaxWindows = 64;

  // The windows of `tokens` (which must hold at least seq + 1), their first token replaced by
  // bos when bos >= 0. Throws kInvalidArgument when tokens are too few.
  HeldOutSet(const std::vector<int32_t>& tokens, int seq, int32_t bos);

  int windows() const { return windows_; }
  int seq() const { return seq_; }
  int64_t scored_tokens() const { return static_cast<int64_t>(windows_) * seq_; }
  const std::vector<int32_t>& data() const { return data_; }  // windows x (seq + 1)

  // Mean cross-entropy (nats) of a training model, `batch` windows per forward pass. The
  // model's activations of its last forward() are overwritten (not its weights or gradients).
  double loss(TrainModel& model, int batch) const;
  // The same for an inference-engine model (a teacher), one window at a time.
  double loss(Model& model, ThreadPool& pool) const;

 private:
  int seq_ = 0;
  int windows_ = 0;
  std::vector<int32_t> data_;
};

}  // namespace rapide::train
