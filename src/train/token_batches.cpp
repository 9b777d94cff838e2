#include "train/token_batches.h"

#include <algorithm>
#include <random>

#include "base/error.h"

namespace rapide::train {

TokenBatches::TokenBatches(std::vector<int32_t> stream, int seq, int32_t bos, uint64_t seed)
    : stream_(std::move(stream)), seq_(seq), bos_(bos), seed_(seed) {
  if (seq <= 0 || static_cast<int64_t>(stream_.size()) < seq + 1) {
    fail(ErrorCode::kInvalidArgument,
         "the training data has {} tokens, fewer than one sequence of {} + 1", stream_.size(), seq);
  }
}

void TokenBatches::fill(int64_t step, int micro, int batch, int32_t* out) const {
  std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32),
                    static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32),
                    static_cast<uint32_t>(micro)};
  std::mt19937_64 rng(seq);
  const int64_t last_start = static_cast<int64_t>(stream_.size()) - (seq_ + 1);
  std::uniform_int_distribution<int64_t> start(0, last_start);
  for (int b = 0; b < batch; ++b) {
    int32_t* row = out + static_cast<int64_t>(b) * (seq_ + 1);
    std::copy_n(stream_.begin() + start(rng), seq_ + 1, row);
    if (bos_ >= 0) row[0] = bos_;
  }
}

}  // namespace rapide::train
