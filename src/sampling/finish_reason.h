// Why a sequence stopped, and the token-level stop rules (stop strings: see stop_checker.h).
#pragma once

#include <cstdint>
#include <optional>

#include "sampling/sampling_params.h"

namespace rapide {

enum class FinishReason {
  kLength,  // max_tokens reached (or the context is full)
  kStop,    // an end-of-generation token, a stop_token_ids token or a stop string
  kAbort,   // the client went away or cancelled
  kError,   // the engine failed on this sequence
};

// The OpenAI `finish_reason` spelling: "length", "stop", "abort", "error".
const char* finish_reason_name(FinishReason reason);

// Whether sampling `token` (the num_generated-th generated token, counting from 1) ends the
// sequence. is_end_of_generation comes from Tokenizer::is_end_of_generation. A stopping token
// is not emitted as text. Stop tokens win over length, so a request that ends on EOS exactly
// at max_tokens reports kStop, as OpenAI does.
std::optional<FinishReason> finish_after_token(const SamplingParams& params, int32_t token,
                                               bool is_end_of_generation, int32_t num_generated);

}  // namespace rapide
