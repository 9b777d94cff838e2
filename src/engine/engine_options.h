// The engine's switches. Each optimization can be turned off so its effect is measurable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kv/default_kv_budget.h"
#include "kv/kv_layout_mode.h"
#include "kv/kv_store.h"
#include "kv/offload_codec.h"

namespace rapide {

enum class BatchingMode {
  kContinuous,  // every step: running sequences decode, waiting ones join (iteration-level)
  kStatic,      // request-level batching, the baseline: a batch is admitted only when the
                // previous one has fully finished, and a finished request's slot keeps
                // computing (as a padded row of a dense batch does) until then
};

BatchingMode parse_batching_mode(const std::string& text);
const char* batching_mode_name(BatchingMode mode);

// Speculative decoding (engine/speculation.h).
enum class SpecMode {
  kOff,
  kNgram,  // prompt lookup in the sequence's own prompt and output
  kDraft,  // a smaller model with the same vocabulary (Engine's draft argument)
};
SpecMode parse_spec_mode(const std::string& text);
const char* spec_mode_name(SpecMode mode);

struct SpecOptions {
  SpecMode mode = SpecMode::kOff;
  int tokens = -1;     // guesses per step; -1 = auto (chosen per sequence from measured costs)
  int max_tokens = 8;  // the most guesses auto may choose
  int ngram_min = 1;
  int ngram_max = 4;
  double draft_min_confidence = 0.75;  // the draft stops guessing below this probability
};

// A request's own speculation settings (the "speculative" extension field of a request body,
// README): unset fields follow the server's. A request may turn speculation off or choose k
// for the proposer the server runs; it cannot ask for a proposer the server was not started
// with (Engine::check_speculation refuses that).
struct SpecOverride {
  std::optional<SpecMode> mode;
  std::optional<int> tokens;  // guesses per step, -1 = auto
};

struct EngineOptions {
  int threads = 0;             // 0 = physical cores
  int max_batch_tokens = 512;  // tokens per forward pass (prefill chunks + decodes)
  int max_seqs = 64;           // sequences running at once
  int prefill_chunk = 512;     // most prompt tokens of one sequence per step
  int max_context = 0;         // 0 = the model's trained context; larger ones are
                               // allowed with a warning (rope extrapolates, quality drops)
  int max_queue = 4096;        // waiting requests before submit() refuses
  BatchingMode batching = BatchingMode::kContinuous;
  KvLayoutMode kv_layout = KvLayoutMode::kPaged;
  KvType kv_type = KvType::kF16;
  int kv_block_size = 16;
  // A size (kv/memory_budget.h), or auto: sized at start-up to the model and the machine
  // (kv/default_kv_budget.h), providing for kv_auto_sequences at full context (0: max_seqs;
  // run and chat hold one) and taking at most kv_auto_cap (batch: more) unless one sequence
  // needs more.
  std::string kv_memory = "auto";
  int kv_auto_sequences = 0;
  uint64_t kv_auto_cap = kAutoKvCap;
  // Automatic prefix caching (kv/prefix_cache.h): full blocks of finished requests stay
  // cached and later prompts sharing the prefix reuse them. Needs the paged layout.
  bool prefix_cache = true;
  // The offload tier behind it (kv/offload_tier.h): evicted blocks go to compressed RAM
  // and/or files instead of being dropped. Empty or "0" sizes / empty dir = that level off.
  std::string kv_offload_ram;            // e.g. "2GiB" (see kv/memory_budget.h)
  std::string kv_offload_dir;            // directory for block files
  std::string kv_offload_size = "4GiB";  // cap of the files in kv_offload_dir
  OffloadCodec kv_offload_codec = OffloadCodec::kLz4;
  SpecOptions spec;
  // Consecutive steps with requests in the scheduler and nothing it can run (the engine waits
  // 1 ms after each) before every live request fails with an internal error instead of
  // waiting forever (engine/scheduler.h, "Progress").
  int stall_steps = 1000;
  // Structured output: matcher steps one token of a constrained request may cost before the
  // request fails (grammar/constraint.h); 0 = grammar::default_work_per_token of the
  // vocabulary. UINT64_MAX: no limit (tests).
  uint64_t grammar_work_per_token = 0;
};

}  // namespace rapide
