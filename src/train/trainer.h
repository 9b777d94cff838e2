// The training loop: batches from a token stream, an objective turning the model's logits
// into a loss and its gradient, gradient accumulation, AdamW on the schedule, periodic
// checkpoints, resume and the progress bar. rapide distill and rapide prune --heal-steps run
// it with a distillation objective (train/distill_objective.h); tests with cross-entropy.
//
// With held-out data (train/held_out.h) the loop scores it before the first step, every
// eval_every steps and after the last, keeps a copy of the weights of the best score, stops
// after `patience` scores in a row without a new best, and ends with the best weights in the
// model: a run that overfits hands back what it had before it did, and says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/adamw.h"
#include "train/held_out.h"
#include "train/token_batches.h"
#include "train/train_model.h"

namespace rapide::train {

// The loss of one micro-batch: windows[batch][seq + 1] (inputs then targets shifted by one),
// the model's logits for the inputs; writes dloss/dlogits times grad_scale.
class Objective {
 public:
  virtual ~Objective() = default;
  virtual double loss(const int32_t* windows, int batch, int seq, const float* logits, int vocab,
                      float grad_scale, float* dlogits) = 0;
};

// Next-token cross-entropy on the data.
class CrossEntropyObjective final : public Objective {
 public:
  double loss(const int32_t* windows, int batch, int seq, const float* logits, int vocab,
              float grad_scale, float* dlogits) override;
};

struct TrainOptions {
  int64_t steps = 100;  // optimizer steps of the whole run
  int batch = 8;        // sequences per micro-batch
  int accumulate = 1;   // micro-batches per optimizer step
  AdamWOptions adamw;
  std::string checkpoint;    // path; empty: none
  int checkpoint_every = 0;  // steps; 0: only at the end
  bool resume = true;        // continue from `checkpoint` when it exists
  int64_t stop_after = -1;   // stop after this step as if killed, without a checkpoint
                             // (tests); -1: run to the end
  bool progress = true;
  std::string label = "train";
  const HeldOutSet* held_out = nullptr;  // null: no held-out scoring, no early stop
  int eval_every = 10;                   // steps between held-out scores (> 0)
  int patience = 3;  // stop after this many scores in a row without a new best; 0: never
};

// One held-out score: after `step` optimizer steps (first_step: before training).
struct HeldOutScore {
  int64_t step = 0;
  double loss = 0.0;
  double perplexity() const;
};

struct TrainResult {
  int64_t first_step = 0;      // 0, or where a resumed run continued
  std::vector<double> losses;  // per step run, from first_step
  int64_t tokens = 0;          // trained in this run
  double seconds = 0.0;
  double tokens_per_second() const { return seconds > 0.0 ? tokens / seconds : 0.0; }

  // With held-out data: every score, in order (the first is before training), and which one
  // the model's weights are now (the lowest loss; the earliest of equal ones).
  std::vector<HeldOutScore> held_out;
  HeldOutScore best;
  bool stopped_early = false;  // the patience ran out before options.steps
  // The last score is worse than the best one (overfitting, or a learning rate too high): the
  // weights were set back to the best score's when the run ended.
  bool kept_earlier() const { return !held_out.empty() && held_out.back().step != best.step; }
};

TrainResult train(TrainModel& model, const TokenBatches& data, Objective& objective,
                  const TrainOptions& options);

}  // namespace rapide::train
