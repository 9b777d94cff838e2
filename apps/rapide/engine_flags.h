// Command-line flags shared by the subcommands that drive an Engine (run, serve, batch,
// bench): the engine's switches and a request's sampling parameters.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine_options.h"
#include "sampling/sampling_params.h"

namespace rapide::cli {

// --max-batch-tokens, --max-seqs (vLLM: --max-num-seqs), --prefill-chunk, --ctx-size, --batching,
// --kv-layout,
// --kv-block-size, --kv-memory, --kv-type, --prefix-cache, --kv-offload-ram,
// --kv-offload-dir, --kv-offload-size, --kv-offload-codec, and llama.cpp's --flash-attn
// (accepted: rapide's attention is always fused). Parsed values land in `options`
// after parse().
struct EngineFlags {
  EngineOptions options;
  std::string batching = "continuous";
  std::string kv_layout = "paged";
  std::string kv_type = "f16";
  std::string prefix_cache = "on";
  std::string kv_offload_codec = "lz4";
  std::string spec;  // empty: off, or draft when --draft-model is given
  std::string draft_model;
  std::string spec_tokens = "auto";
  // Converts the string-valued flags; throws Error(kInvalidArgument) for unknown values.
  EngineOptions resolve(int threads) const;
  // resolve() for one interactive sequence (run, chat): unless --kv-memory was given, a KV
  // budget of exactly one full context instead of the server's --max-seqs of them.
  EngineOptions resolve_for_one_sequence(int threads) const;
};
void add_engine_flags(CLI::App& command, EngineFlags& flags);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
// --frequency-penalty, --seed, -n/--max-tokens/--n-predict (-1: to the context's end),
// --min-tokens, --ignore-eos, --stop,
// --logit-bias, --top-logprobs.
struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;                    // -1 = random
  std::vector<std::string> logit_bias;  // "TOKEN=BIAS" or "TOKEN=-inf"
  SamplingParams resolve() const;
};
void add_sampling_flags(CLI::App& command, SamplingFlags& flags);

// llama.cpp's --jinja on the commands that apply chat templates (serve, chat, batch): rapide
// always renders the model's Jinja template (or --chat-template's), so it is accepted as is.
void add_jinja_flag(CLI::App& command);

}  // namespace rapide::cli
