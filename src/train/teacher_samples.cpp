#include "train/teacher_samples.h"

#include <algorithm>

#include "base/error.h"
#include "model/contiguous_kv_store.h"
#include "sampling/sampler.h"

namespace rapide::train {

std::vector<int32_t> generate_sequences(Model& teacher, ThreadPool& pool, int count, int length,
                                        int32_t bos, float temperature, uint64_t seed) {
  if (count <= 0 || length < 2 || length > teacher.config().max_context) {
    fail(ErrorCode::kInvalidArgument,
         "--generate needs a positive count and sequences of 2 to {} tokens (got {} x {})",
         teacher.config().max_context, count, length);
  }
  constexpr int kParallel = 32;
  const int vocab = teacher.config().vocab_size;
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(count) * length);
  ContiguousKvStore kv(teacher.config(), std::min(count, kParallel), length);
  for (int first = 0; first < count; first += kParallel) {
    const int n = std::min(kParallel, count - first);
    std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(n), {std::max(bos, 0)});
    std::vector<Sampler> samplers;
    for (int s = 0; s < n; ++s) {
      SamplingParams params;
      params.temperature = temperature;
      params.seed = seed + static_cast<uint64_t>(first + s);
      params.ignore_eos = true;
      samplers.emplace_back(params, vocab);
    }
    Batch batch;
    for (int pos = 0; pos + 1 < length; ++pos) {
      batch.clear();
      for (int s = 0; s < n; ++s) batch.add(seqs[s].back(), s, pos, true);
      const std::span<const float> logits = teacher.forward(batch, kv, pool);
      std::vector<float> row(static_cast<size_t>(vocab));
      for (int s = 0; s < n; ++s) {
        std::copy_n(logits.begin() + static_cast<int64_t>(s) * vocab, vocab, row.begin());
        seqs[s].push_back(samplers[s].sample(row, seqs[s]).token);
      }
    }
    for (const auto& s : seqs) out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

}  // namespace rapide::train
