#include "apps/rapide/engine_flags.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "base/error.h"
#include "kernels/kv_rows.h"

namespace rapide::cli {

void add_engine_flags(CLI::App& command, EngineFlags& flags) {
  EngineOptions& o = flags.options;
  command.add_option("--max-batch-tokens", o.max_batch_tokens, "tokens per forward pass")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command.add_option("--max-seqs,--max-num-seqs", o.max_seqs, "sequences running at once")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  command
      .add_option("--prefill-chunk", o.prefill_chunk, "most prompt tokens of one sequence per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command
      .add_option("-c,--ctx-size,--max-model-len", o.max_context,
                  "context length (0 = the model's)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  command.add_option("--batching", flags.batching, "continuous | static")->capture_default_str();
  command.add_option("--kv-layout", flags.kv_layout, "paged | contiguous")->capture_default_str();
  command.add_option("--kv-block-size", o.kv_block_size, "token positions per KV block")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command
      .add_option("--kv-memory", o.kv_memory,
                  "KV budget: auto (every sequence at full context, at most 1GiB (batch: "
                  "2GiB) and 3/4 of free RAM; logged at start-up), 2GiB, 512MiB, or a fraction "
                  "of free RAM (0.5)")
      ->capture_default_str();
  command.add_option("--kv-type", flags.kv_type, "f16 | f32 | q8_0 | q4_0")->capture_default_str();
  command
      .add_option("--prefix-cache", flags.prefix_cache,
                  "on | off: reuse the KV of prompt prefixes already computed")
      ->capture_default_str();
  command.add_option("--kv-offload-ram", o.kv_offload_ram,
                     "compressed-RAM tier for evicted KV blocks: 2GiB, 512MiB (empty = off)");
  command.add_option("--kv-offload-dir", o.kv_offload_dir,
                     "directory for evicted KV blocks (files checked on load; empty = off)");
  command
      .add_option("--kv-offload-size", o.kv_offload_size, "cap of the files in --kv-offload-dir")
      ->capture_default_str();
  command.add_option("--kv-offload-codec", flags.kv_offload_codec, "lz4 | zstd | none")
      ->capture_default_str();
  command.add_option(
      "--spec", flags.spec,
      "speculative decoding: off | ngram (guesses from the sequence's own prompt "
      "and output) | draft (--draft-model's); default off, draft with a draft model");
  command.add_option("--draft-model", flags.draft_model,
                     "a smaller model with the same vocabulary that proposes tokens for the "
                     "target to verify (any format rapide loads)");
  command
      .add_option("--spec-tokens", flags.spec_tokens,
                  "guesses per step: a number, or auto (chosen per sequence from measured "
                  "acceptance and step costs; 0 below break-even)")
      ->capture_default_str();
  command.add_option("--spec-max-tokens", o.spec.max_tokens, "the most guesses auto may choose")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      .add_option("--draft-p-min", o.spec.draft_min_confidence,
                  "the draft model stops guessing at a token it gives less probability")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command.add_option("--spec-ngram-min", o.spec.ngram_min, "shortest n-gram to match")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command.add_option("--spec-ngram-max", o.spec.ngram_max, "longest n-gram to match")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  // llama.cpp's switch (-fa is rewritten to it: cli_conventions.h). rapide has one attention
  // path, already fused: each query's scores live in a per-job scratch row, read over the
  // paged KV in one pass (kernels/attention.h), never an n x n matrix; so every value runs it.
  command
      .add_option_function<std::string>(
          "--flash-attn", [](const std::string&) {},
          "llama.cpp's -fa [on|off|auto]: accepted, changes nothing: rapide's attention is always "
          "one fused pass over the paged KV cache per query (no n x n score matrix)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"on", "off", "auto"}));
  command.add_option("--max-queue", o.max_queue, "waiting requests before new ones are refused")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
}

EngineOptions EngineFlags::resolve(int threads) const {
  EngineOptions o = options;
  o.threads = threads;
  o.batching = parse_batching_mode(batching);
  o.kv_layout = parse_kv_layout_mode(kv_layout);
  if (prefix_cache == "on") {
    o.prefix_cache = true;
  } else if (prefix_cache == "off") {
    o.prefix_cache = false;
  } else {
    fail(ErrorCode::kInvalidArgument, "--prefix-cache must be on or off, got '{}'", prefix_cache);
  }
  o.kv_offload_codec = parse_offload_codec(kv_offload_codec);
  o.spec.mode = spec.empty() ? (draft_model.empty() ? SpecMode::kOff : SpecMode::kDraft)
                             : parse_spec_mode(spec);
  if (o.spec.mode == SpecMode::kDraft && draft_model.empty()) {
    fail(ErrorCode::kInvalidArgument, "--spec draft needs --draft-model PATH");
  }
  if (o.spec.mode != SpecMode::kDraft && !draft_model.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--draft-model is used only with --spec draft (got --spec {})", spec);
  }
  if (spec_tokens == "auto") {
    o.spec.tokens = -1;
  } else {
    char* end = nullptr;
    const long k = std::strtol(spec_tokens.c_str(), &end, 10);
    if (spec_tokens.empty() || *end != '\0' || k < 0 || k > 64) {
      fail(ErrorCode::kInvalidArgument, "--spec-tokens must be auto or a number 0..64, got '{}'",
           spec_tokens);
    }
    o.spec.tokens = static_cast<int>(k);
  }
  if (o.spec.ngram_min > o.spec.ngram_max) {
    fail(ErrorCode::kInvalidArgument, "--spec-ngram-min ({}) is above --spec-ngram-max ({})",
         o.spec.ngram_min, o.spec.ngram_max);
  }
  o.kv_type = parse_kv_type(kv_type);
  return o;
}

EngineOptions EngineFlags::resolve_for_one_sequence(int threads) const {
  EngineOptions o = resolve(threads);
  o.kv_auto_sequences = 1;  // --kv-memory auto: exactly one full context
  return o;
}

void add_sampling_flags(CLI::App& command, SamplingFlags& flags) {
  SamplingParams& p = flags.params;
  // llama.cpp's CLI defaults, so `rapide run` and `llama-cli` sample alike.
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.max_tokens = 256;
  command.add_option("--temp,--temperature", p.temperature, "temperature (0 = greedy)")
      ->capture_default_str();
  command.add_option("--top-k", p.top_k, "keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  command
      .add_option("--top-p", p.top_p,
                  "nucleus sampling threshold (1 = off, 0 = the most likely token)")
      ->capture_default_str();
  command.add_option("--min-p", p.min_p, "drop tokens below min-p x the best (0 = off)")
      ->capture_default_str();
  command.add_option("--repeat-penalty", p.repetition_penalty, "repetition penalty (1 = off)")
      ->capture_default_str();
  command.add_option("--repeat-last-n", p.penalty_last_n, "penalty window (-1 = whole history)")
      ->capture_default_str();
  command.add_option("--presence-penalty", p.presence_penalty, "OpenAI presence penalty")
      ->capture_default_str();
  command.add_option("--frequency-penalty", p.frequency_penalty, "OpenAI frequency penalty")
      ->capture_default_str();
  command.add_option("-s,--seed", flags.seed, "RNG seed (-1 = random)")->capture_default_str();
  command
      .add_option("-n,--max-tokens,--n-predict", p.max_tokens,
                  "tokens to generate (-1 = until end-of-generation or the context's end)")
      ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()))
      ->capture_default_str();
  command.add_option("--min-tokens", p.min_tokens, "tokens before end-of-generation is allowed");
  command.add_flag("--ignore-eos", p.ignore_eos, "never stop at end-of-generation tokens");
  command.add_option("--stop", p.stop, "stop string (repeatable)");
  command.add_option("--stop-token", p.stop_token_ids, "stop token id (repeatable)");
  command.add_option("--logit-bias", flags.logit_bias, "TOKEN=BIAS, e.g. 13=-inf (repeatable)");
  command.add_option("--top-logprobs", p.top_logprobs, "alternatives to report per token");
}

void add_jinja_flag(CLI::App& command) {
  command.add_flag("--jinja")->description(
      "llama.cpp's switch, accepted: chat templates are always rendered as Jinja (the model's, "
      "or --chat-template's)");
}

SamplingParams SamplingFlags::resolve() const {
  SamplingParams p = params;
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  // llama.cpp's -n -1: no limit but the context (the engine caps every sequence at its end).
  if (p.max_tokens == -1) p.max_tokens = std::numeric_limits<int32_t>::max();
  for (const std::string& entry : logit_bias) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      fail(ErrorCode::kInvalidArgument, "--logit-bias expects TOKEN=BIAS, got '{}'", entry);
    }
    TokenBias bias;
    try {
      bias.token = std::stoi(entry.substr(0, eq));
      const std::string value = entry.substr(eq + 1);
      bias.bias = value == "-inf" ? -INFINITY : std::stof(value);
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidArgument, "--logit-bias expects TOKEN=BIAS, got '{}'", entry);
    }
    p.logit_bias.push_back(bias);
  }
  return p;
}

}  // namespace rapide::cli
