#include "train/trainer.h"

#include <algorithm>
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

TrainResult train(TrainModel& model, const TokenBatches& data, Objective& objective,
                  const TrainOptions& o) {
  if (o.steps <= 0 || o.batch <= 0 || o.accumulate <= 0) {
    fail(ErrorCode::kInvalidArgument, "training needs positive steps, batch and accumulation");
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
    result.seconds = seconds_between(start, Clock::now());
    bar.update(step, loss, lr, result.tokens, result.seconds);
    const bool last = step + 1 == o.steps;
    if (!o.checkpoint.empty() &&
        (last || (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0))) {
      save_checkpoint(o.checkpoint, step + 1, model, optimizer);
    }
    if (step == o.stop_after) break;
  }
  return result;
}

}  // namespace rapide::train
