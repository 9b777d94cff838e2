#include "train/held_out.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/contiguous_kv_store.h"

namespace rapide::train {

namespace {

// Sum over rows of -log softmax(row)[target], in double.
double total_nll(const float* logits, int64_t rows, int vocab, const int32_t* targets) {
  double total = 0.0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = logits + i * vocab;
    const float max_value = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - max_value));
    total += std::log(sum) - static_cast<double>(row[targets[i]] - max_value);
  }
  return total;
}

}  // namespace

HeldOutSplit split_held_out(std::vector<int32_t> stream, double fraction, int seq) {
  if (!(fraction >= 0.0 && fraction <= 0.9)) {
    fail(ErrorCode::kInvalidArgument, "--holdout {} must be a fraction in [0, 0.9]", fraction);
  }
  HeldOutSplit split;
  if (fraction == 0.0) {
    split.train = std::move(stream);
    return split;
  }
  const int64_t n = static_cast<int64_t>(stream.size());
  const int64_t window = static_cast<int64_t>(seq) + 1;
  const int64_t held = std::max(window, static_cast<int64_t>(std::ceil(fraction * n)));
  if (n - held < window) {
    fail(ErrorCode::kInvalidArgument,
         "the training data has {} tokens: too few to hold out {} % of them (at least one "
         "sequence of {} + 1) and still train on one; give more data, a shorter --seq or "
         "--holdout 0 (then overfitting goes unnoticed)",
         n, fraction * 100.0, seq);
  }
  split.held_out.assign(stream.end() - held, stream.end());
  stream.resize(static_cast<size_t>(n - held));
  split.train = std::move(stream);
  return split;
}

HeldOutSet::HeldOutSet(const std::vector<int32_t>& tokens, int seq, int32_t bos) : seq_(seq) {
  const int64_t window = static_cast<int64_t>(seq) + 1;
  const int64_t available = seq > 0 ? static_cast<int64_t>(tokens.size()) / window : 0;
  if (available == 0) {
    fail(ErrorCode::kInvalidArgument, "{} held-out tokens are fewer than one window of {} + 1",
         tokens.size(), seq);
  }
  windows_ = static_cast<int>(std::min<int64_t>(available, kMaxWindows));
  data_.resize(static_cast<size_t>(windows_ * window));
  for (int w = 0; w < windows_; ++w) {
    // Evenly spread when there are more windows than are scored.
    const int64_t source = static_cast<int64_t>(w) * available / windows_;
    std::copy_n(tokens.begin() + source * window, window, data_.begin() + w * window);
    if (bos >= 0) data_[static_cast<size_t>(w * window)] = bos;
  }
}

double HeldOutSet::loss(TrainModel& model, int batch) const {
  const int64_t window = static_cast<int64_t>(seq_) + 1;
  batch = std::clamp(batch, 1, windows_);
  std::vector<int32_t> inputs(static_cast<size_t>(batch) * seq_);
  std::vector<int32_t> targets(inputs.size());
  double total = 0.0;
  for (int first = 0; first < windows_; first += batch) {
    const int n = std::min(batch, windows_ - first);
    for (int b = 0; b < n; ++b) {
      const int32_t* w = data_.data() + (first + b) * window;
      std::copy_n(w, seq_, inputs.begin() + static_cast<int64_t>(b) * seq_);
      std::copy_n(w + 1, seq_, targets.begin() + static_cast<int64_t>(b) * seq_);
    }
    const std::span<const float> logits = model.forward(inputs.data(), n, seq_);
    total += total_nll(logits.data(), static_cast<int64_t>(n) * seq_, model.shape().vocab,
                       targets.data());
  }
  return total / static_cast<double>(scored_tokens());
}

double HeldOutSet::loss(Model& model, ThreadPool& pool) const {
  const int64_t window = static_cast<int64_t>(seq_) + 1;
  ContiguousKvStore kv(model.config(), 1, seq_, KvType::kF32);
  Batch batch;
  double total = 0.0;
  for (int w = 0; w < windows_; ++w) {
    const int32_t* tokens = data_.data() + w * window;
    batch.clear();
    for (int t = 0; t < seq_; ++t) batch.add(tokens[t], 0, t, true);
    const std::span<const float> logits = model.forward(batch, kv, pool);
    total += total_nll(logits.data(), seq_, model.config().vocab_size, tokens + 1);
  }
  return total / static_cast<double>(scored_tokens());
}

}  // namespace rapide::train
