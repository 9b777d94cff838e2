#include "engine/prefill_worker.h"

#include <algorithm>

#include "base/cpu_features.h"
#include "base/error.h"
#include "engine/model_identity.h"
#include "kv/block_hash.h"
#include "model/batch.h"

namespace rapide {

namespace {
constexpr int32_t kSequence = 0;  // the worker's only sequence
}  // namespace

PrefillWorker::PrefillWorker(Model& model, const EngineOptions& options)
    : model_(model), chunk_(std::max(1, options.prefill_chunk)) {
  const ModelConfig& c = model_.config();
  const int context = options.max_context > 0 ? options.max_context : c.max_context;
  const KvLayout layout = KvLayout::for_model(c, options.kv_block_size, options.kv_type);
  identity_ = model_identity(model_, layout);
  const int bs = options.kv_block_size;
  kv_ = std::make_unique<PagedKvStore>(layout, (context + bs - 1) / bs, context);
  pool_ =
      std::make_unique<ThreadPool>(options.threads > 0 ? options.threads : physical_core_count());
}

PrefilledKv PrefillWorker::prefill(RequestId id, std::span<const int32_t> tokens) {
  PrefilledKv out;
  out.request_id = id;
  out.identity = identity_;
  out.block_bytes = static_cast<uint32_t>(kv_->pool().block_bytes());
  const TimePoint start = Clock::now();
  const int bs = block_size();
  const int n = static_cast<int>(tokens.size()) / bs * bs;
  try {
    kv_->reserve(kSequence, n);
    Batch batch;
    for (int from = 0; from < n; from += chunk_) {
      batch.clear();
      const int to = std::min(n, from + chunk_);
      // No logits: only the K/V the pass writes are wanted.
      for (int p = from; p < to; ++p)
        batch.add(tokens[static_cast<size_t>(p)], kSequence, p, false);
      model_.forward(batch, *kv_, *pool_);
    }
    extend_block_hashes(tokens.first(static_cast<size_t>(n)), bs, identity_, out.hashes);
    const std::span<const int32_t> table = kv_->block_table(kSequence);
    out.blocks.resize(out.hashes.size() * out.block_bytes);
    for (size_t b = 0; b < out.hashes.size(); ++b) {
      kv_->export_block(
          table[b], std::span<uint8_t>(out.blocks).subspan(b * out.block_bytes, out.block_bytes));
    }
  } catch (const std::exception& e) {
    out.hashes.clear();
    out.blocks.clear();
    out.error = e.what();
  }
  kv_->release(kSequence);
  out.prefill_seconds = seconds_between(start, Clock::now());
  return out;
}

}  // namespace rapide
