// llama-server's native request and response shapes (llama.cpp tools/server/README.md), as
// plain functions of parsed JSON so they are tested without HTTP:
//
//   POST /completion        parse_native_completion -> a GenerationSpec for the engine, and
//                           completion_json / partial_json for the answer (llama-server's
//                           field names: content, tokens, stop, stop_type, stopping_word,
//                           tokens_predicted, tokens_evaluated, tokens_cached, timings, ...)
//   POST /infill            infill_prompt: input_extra / input_prefix / input_suffix / prompt
//                           -> tokens around the vocabulary's FIM tokens
//   GET  /props, /slots     props_json, slot_json
//
// Semantics follow llama-server where rapide can honour them; where it cannot, the request is
// refused (400 naming the field) rather than silently run differently:
// * sampling defaults are llama-server's (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
//   n_predict -1 = until the context is full), not OpenAI's;
// * samplers rapide lacks (mirostat, DRY, XTC, typical_p, dynatemp, top_n_sigma) are accepted
//   only at their "off" values;
// * cache_prompt is accepted and has no switch to flip: rapide's prefix cache is exact
//   (shared K/V blocks of identical prefixes), so reuse never changes the output;
// * id_slot is accepted and checked against total_slots; the scheduler places every
//   sequence itself (there are no fixed slots to pin a request to), so it only echoes back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/choice_outcome.h"
#include "api/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace rapide::serve::llama {

// llama-server's /completion defaults (its README's "Options" and `/props` example).
struct NativeDefaults {
  static constexpr float kTemperature = 0.8f;
  static constexpr int kTopK = 40;
  static constexpr float kTopP = 0.95f;
  static constexpr float kMinP = 0.05f;
  static constexpr float kRepeatPenalty = 1.0f;
  static constexpr int kRepeatLastN = 64;
  // llama-server's "no seed given" marker (LLAMA_DEFAULT_SEED).
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFFull;
};

// One parsed /completion (or /infill) request.
struct NativeCompletion {
  api::GenerationSpec spec;  // prompts already tokenized
  bool batch = false;        // "prompt" listed several prompts: the answer is a JSON array
  bool return_tokens = false;
  int n_predict = -1;  // as asked; -1 = until the context is full
  int n_probs = 0;
  int id_slot = -1;
  bool cache_prompt = true;
  // "response_fields": keep only these ("a/b" lifts b out of object a, named "a/b").
  std::vector<std::string> response_fields;
  // The settings echoed as "generation_settings" (the README's field names).
  nlohmann::json generation_settings;
};

// Parses a /completion body. `prompt_override`: /infill's tokens (then "prompt" is not read).
// Throws ApiError(400) naming the field for a malformed or unsupported value.
NativeCompletion parse_native_completion(const nlohmann::json& body, const Tokenizer& tokenizer,
                                         int total_slots, int n_ctx,
                                         const std::vector<int32_t>* prompt_override = nullptr);

// The settings /props reports as default_generation_settings.params.
nlohmann::json default_params_json();

// What one finished prompt came to, beside its ChoiceOutcome.
struct FinishedPrompt {
  const api::ChoiceOutcome* outcome = nullptr;
  std::vector<int32_t> tokens;   // generated ids, the final stop / EOS token included
  double prompt_seconds = 0.0;   // prefill
  double predict_seconds = 0.0;  // first token -> finished
};

// The non-streamed answer for prompt `index` (also the last event of a stream, with
// content ""). `prompt_tokens` is the prompt as run (its text is echoed as "prompt").
nlohmann::json completion_json(const NativeCompletion& request, size_t index,
                               const FinishedPrompt& done,
                               const std::vector<int32_t>& prompt_tokens,
                               const Tokenizer& tokenizer, const std::string& model, int n_ctx,
                               bool streamed);

// A streamed token event: {"index","content","tokens","stop": false, "id_slot",
// "tokens_predicted", "tokens_evaluated"} (+ "completion_probabilities" with n_probs).
nlohmann::json partial_json(const NativeCompletion& request, size_t index, const std::string& text,
                            int32_t token, int32_t tokens_predicted, int32_t tokens_evaluated,
                            const api::LogprobEntry* probs, const Tokenizer& tokenizer);

// Applies "response_fields" to one answer object.
nlohmann::json select_fields(const nlohmann::json& answer, const std::vector<std::string>& fields);

// The vocabulary's fill-in-the-middle tokens (-1: absent), as llama.cpp finds them: the GGUF
// keys tokenizer.ggml.fim_{pre,suf,mid,pad,rep,sep}_token_id, else the token texts the
// common FIM vocabularies use (<|fim_prefix|>, <fim-prefix>, <PRE>, ...).
struct FimTokens {
  int32_t pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
  bool usable() const { return pre >= 0 && suf >= 0 && mid >= 0; }
};
// `gguf_path`: the model file to read the keys from; empty: token texts only.
FimTokens find_fim_tokens(const std::string& gguf_path, const Tokenizer& tokenizer);

// /infill's prompt (README "POST /infill"): with FIM_REP and FIM_SEP the repo-level pattern
// <REP>myproject\n<SEP>{file}\n{text}...<SEP>filename\n, else the extra context as plain text,
// then <PRE>{input_prefix}<SUF>{input_suffix}<MID>{prompt}; BOS first when the model adds it.
// ApiError(400) for a malformed input_extra, or when the model has no FIM tokens (naming
// which are missing).
std::vector<int32_t> infill_prompt(const nlohmann::json& body, const Tokenizer& tokenizer,
                                   const FimTokens& fim);

}  // namespace rapide::serve::llama
