#include "train/distill_objective.h"

#include "base/error.h"

namespace rapide::train {

DistillObjective::DistillObjective(Model& teacher, ThreadPool& pool, int student_vocab,
                                   const DistillOptions& options)
    : teacher_(teacher), pool_(pool), options_(options) {
  if (teacher.config().vocab_size != student_vocab) {
    fail(ErrorCode::kInvalidArgument,
         "the student's vocabulary ({} tokens) differs from the teacher's ({})", student_vocab,
         teacher.config().vocab_size);
  }
  if (options.top_k <= 0 || options.loss.temperature <= 0.0f || options.loss.ce_weight < 0.0f ||
      options.loss.ce_weight > 1.0f) {
    fail(ErrorCode::kInvalidArgument,
         "distillation needs --top-k > 0, --temperature > 0 and --ce-weight in [0, 1]");
  }
}

double DistillObjective::loss(const int32_t* windows, int batch, int seq, const float* logits,
                              int vocab, float grad_scale, float* dlogits) {
  if (!kv_ || kv_->n_sequences() < batch || kv_->max_context() < seq) {
    kv_ = std::make_unique<ContiguousKvStore>(teacher_.config(), batch, seq, KvType::kF32);
  }
  // The teacher sees the student's inputs, each window a fresh sequence from position 0.
  batch_.clear();
  targets_.resize(static_cast<size_t>(batch) * seq);
  for (int b = 0; b < batch; ++b) {
    const int32_t* w = windows + static_cast<int64_t>(b) * (seq + 1);
    for (int t = 0; t < seq; ++t) {
      batch_.add(w[t], b, t, true);
      targets_[static_cast<size_t>(b) * seq + t] = w[t + 1];
    }
  }
  const std::span<const float> teacher_logits = teacher_.forward(batch_, *kv_, pool_);
  const int64_t rows = static_cast<int64_t>(batch) * seq;
  teacher_top_k(teacher_logits.data(), rows, vocab, options_.top_k, options_.loss.temperature,
                top_);
  return distill_loss(logits, rows, vocab, top_, targets_.data(), options_.loss, grad_scale,
                      dlogits);
}

}  // namespace rapide::train
