// A request as the scheduler tracks it while it waits, runs, or is preempted. The scheduler
// owns every Sequence and is the only code that changes one (Scheduler::update); the rest of
// the engine reads sequences through Scheduler::get and talks about them by request id.
//
// What is not scheduling state lives elsewhere: the sampler, detokenizer, stop strings and
// event sink of a request belong to the OutputProcessor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/request.h"
#include "sampling/sampler.h"

namespace rapide {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  RequestId id = 0;
  int32_t kv_id = 0;  // the KV store's sequence id (unique while alive)
  int priority = 0;
  int32_t adapter = -1;  // the request's LoRA adapter (Request::adapter)
  // The prefix-cache chain of its K/V (PrefixCache: 0 for the model alone, the adapter's
  // key otherwise): what one adapter computed is never served to another.
  uint64_t prefix_chain = 0;
  uint64_t arrival_order = 0;  // FCFS tie-break, and "youngest" for preemption
  SequenceStatus status = SequenceStatus::kWaiting;

  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int prompt_length = 0;
  int num_computed = 0;   // positions whose K/V are in the KV store
  int max_generated = 0;  // max_tokens, clipped to the context
  int preemptions = 0;
  // Its tokens are constrained by a grammar: no speculative guesses (they would need
  // checking against the grammar too).
  bool constrained = false;

  // Prefix cache: hashes of the full blocks of `tokens` (extended as it grows), how many of
  // its blocks are registered in the cache, and the prompt positions the first admission
  // took from the cache (reported on the final event).
  std::vector<uint64_t> block_hashes;
  int registered_blocks = 0;
  int cached_prompt_tokens = 0;
  KvTransferReport kv_transfer;  // disaggregation: what the prompt's K/V moving cost

  RequestTimings timings;
  SpecOverride spec;  // the request's speculation settings (Scheduler::propose reads them)
  // A sampling request under a draft model: the draft's sampler (the request's params, a seed
  // of its own), which draws the draft's guesses. Null for greedy requests.
  std::unique_ptr<Sampler> draft_sampler;
  // Static batching only: the request has finished (its client has the final event) but,
  // as a row of a dense batch would, its slot keeps computing until the whole batch is done.
  bool padding = false;

  int generated() const { return static_cast<int>(tokens.size()) - prompt_length; }
  // Tokens still to feed before the next logits are due (1 for a decoding sequence).
  int uncomputed() const { return static_cast<int>(tokens.size()) - num_computed; }
  bool is_prefilling() const { return uncomputed() > 1; }
};

}  // namespace rapide
