// The prefill side of prefill/decode disaggregation (issue 21): computes the K/V of a prompt's
// full blocks with the model and returns them with their block hashes as a PrefilledKv, for
// the decode engine's prefix cache (engine/remote_prefill.h).
//
// One prompt at a time, in chunks of --prefill-chunk tokens, on a KV store of its own that
// holds one sequence of the context length; nothing is kept between prompts. The layout
// (block size, KV element type) and the model identity are the ones Engine uses for the same
// options, so the decode engine's prefix cache accepts the blocks (it checks the identity).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/thread_pool.h"
#include "engine/engine_options.h"
#include "engine/remote_prefill.h"
#include "kv/paged_kv_store.h"
#include "model/model.h"

namespace rapide {

class PrefillWorker {
 public:
  // The model must outlive the worker; options are the decode engine's (threads, block size,
  // KV type, prefill chunk, context).
  PrefillWorker(Model& model, const EngineOptions& options);

  uint64_t identity() const { return identity_; }
  int block_size() const { return kv_->block_size(); }

  // The K/V of every full block of `tokens` (a trailing partial block is ignored). A failure
  // (a token outside the vocabulary, a prompt longer than the context) comes back as
  // PrefilledKv::error, never as an exception: the decode side then computes the prompt.
  PrefilledKv prefill(RequestId id, std::span<const int32_t> tokens);

 private:
  Model& model_;
  int chunk_;
  uint64_t identity_ = 0;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PagedKvStore> kv_;
};

}  // namespace rapide
