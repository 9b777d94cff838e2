#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/clock.h"
#include "base/error.h"
#include "train/checkpoint.h"
#include "train/losses.h"
#include "train/progress_bar.h"

namespace rapide::train {

double CrossEntropyObjective::loss(const int32_t* windows, int batch, int seq, const float* logits,
                                   int vocab, float grad_scale, float* dlogits) {
  std::vector<int32_t> targets(static_cast<size_t>(batch) * seq);
  for (int b = 0; b < batch; ++b) {
    std::copy_n(windows + static_cast<int64_t>(b) * (seq + 1) + 1, seq,
                targets.begin() + static_cast<int64_t>(b) * seq);
  }
  return cross_entropy(logits, static_cast<int64_t>(batch) * seq, vocab, targets.data(), grad_scale,
                       dlogits);
}

double HeldOutScore::perplexity() const {
  return std::exp(loss);
}

namespace {

// The held-out bookkeeping of one run: scores, the best weights, the patience count.
class HeldOutTracker {
 public:
  HeldOutTracker(const TrainOptions& o, TrainResult& result) : o_(o), result_(result) {}

  bool enabled() const { return o_.held_out != nullptr; }
  bool due(int64_t steps_done) const {
    return enabled() && (steps_done % o_.eval_every == 0 || steps_done == o_.steps);
  }

  // Scores the model after steps_done steps; true when the run should stop (patience spent).
  bool score(TrainModel& model, int64_t steps_done, ProgressBar& bar) {
    const HeldOutScore now{steps_done, o_.held_out->loss(model, o_.batch)};
    result_.held_out.push_back(now);
    if (result_.held_out.size() == 1 || now.loss < result_.best.loss) {
      result_.best = now;
      best_params_ = model.params();
      without_gain_ = 0;
      return false;
    }
    ++without_gain_;
    if (without_gain_ == 1) {
      bar.note(fmt::format(
          "{}: warning: held-out perplexity rose to {:.2f} after step {} (best {:.2f} after step "
          "{}): training now makes the model worse on text it does not train on (overfitting, "
          "or a learning rate too high)",
          o_.label, now.perplexity(), now.step, result_.best.perplexity(), result_.best.step));
    }
    return o_.patience > 0 && without_gain_ >= o_.patience;
  }

  // Sets the model back to the best score's weights when the last score was not the best.
  void keep_best(TrainModel& model) {
    if (result_.kept_earlier()) model.params() = std::move(best_params_);
  }

 private:
  const TrainOptions& o_;
  TrainResult& result_;
  std::vector<float> best_params_;
  int without_gain_ = 0;
};

}  // namespace

TrainResult train(TrainModel& model, const TokenBatches& data, Objective& objective,
                  const TrainOptions& o) {
  if (o.steps <= 0 || o.batch <= 0 || o.accumulate <= 0) {
    fail(ErrorCode::kInvalidArgument, "training needs positive steps, batch and accumulation");
  }
  if (o.held_out != nullptr && (o.eval_every <= 0 || o.patience < 0)) {
    fail(ErrorCode::kInvalidArgument,
         "held-out scoring needs --eval-every > 0 and --patience >= 0");
  }
  const int seq = data.seq(), vocab = model.shape().vocab;
  AdamW optimizer(o.adamw, model.parameter_count());
  TrainResult result;
  if (!o.checkpoint.empty() && o.resume && std::filesystem::exists(o.checkpoint)) {
    result.first_step = load_checkpoint(o.checkpoint, model, optimizer);
  }
  std::vector<int32_t> windows(static_cast<size_t>(o.batch) * (seq + 1));
  std::vector<int32_t> inputs(static_cast<size_t>(o.batch) * seq);
  std::vector<float> dlogits;
  ProgressBar bar(o.label, result.first_step, o.steps, o.progress);
  HeldOutTracker held_out(o, result);
  if (held_out.enabled()) held_out.score(model, result.first_step, bar);
  const TimePoint start = Clock::now();
  for (int64_t step = result.first_step; step < o.steps; ++step) {
    std::fill(model.grads().begin(), model.grads().end(), 0.0f);
    double loss = 0.0;
    for (int micro = 0; micro < o.accumulate; ++micro) {
      data.fill(step, micro, o.batch, windows.data());
      for (int b = 0; b < o.batch; ++b) {
        std::copy_n(windows.begin() + static_cast<int64_t>(b) * (seq + 1), seq,
                    inputs.begin() + static_cast<int64_t>(b) * seq);
      }
      const std::span<const float> logits = model.forward(inputs.data(), o.batch, seq);
      dlogits.resize(logits.size());
      loss += objective.loss(windows.data(), o.batch, seq, logits.data(), vocab,
                             1.0f / static_cast<float>(o.accumulate), dlogits.data());
      model.backward(dlogits.data());
      result.tokens += static_cast<int64_t>(o.batch) * seq;
    }
    loss /= o.accumulate;
    const float lr = scheduled_lr(o.adamw, step, o.steps);
    optimizer.step(model, lr);
    result.losses.push_back(loss);
    // Scored before the checkpoint is written, which holds this step's weights, not the best
    // ones: a resumed run continues the same curve.
    const bool stop = held_out.due(step + 1) && held_out.score(model, step + 1, bar);
    result.seconds = seconds_between(start, Clock::now());
    bar.update(step, loss, lr, result.tokens, result.seconds,
               result.held_out.empty() ? 0.0 : result.held_out.back().perplexity());
    const bool last = step + 1 == o.steps;
    if (!o.checkpoint.empty() &&
        (last || (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0))) {
      save_checkpoint(o.checkpoint, step + 1, model, optimizer);
    }
    if (step == o.stop_after) break;
    if (stop && !last) {
      result.stopped_early = true;
      bar.note(fmt::format(
          "{}: stopped early after step {} of {}: the held-out loss has not improved for {} "
          "scores (--patience)",
          o.label, step + 1, o.steps, o.patience));
      break;
    }
  }
  held_out.keep_best(model);
  return result;
}

}  // namespace rapide::train
