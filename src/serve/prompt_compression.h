// The "compression" extension of /v1/completions and /v1/chat/completions (issue 24):
//
//   "compression": {"ratio": 0.5, "question": "...", "force": false}
//
// compresses the context the prompt marks with <context>...</context> (a completions
// "prompt" string, or the string contents of chat messages, compressed together; see
// compress/context_markup.h) before the request is tokenized and admitted. "question"
// defaults to the last user message without a context (chat), else the text after the last
// "</context>". "force" compresses even when the cost estimate says it does not pay.
// Without the field the prompt is left exactly as sent (tags included).
//
// The response's usage gains "compression": {"applied", "reason" (when not applied),
// "ratio", "original_prompt_tokens", "compressed_prompt_tokens", "passages",
// "kept_passages", "compression_ms", "estimated_scoring_ms", "estimated_saved_prefill_ms"}.
// Compression runs on the request's worker before admission, so it is part of the time to
// first token the client sees; compression_ms says how much.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "api/openai_protocol.h"
#include "compress/prompt_compressor.h"
#include "formats/model_file.h"
#include "tokenizer/tokenizer.h"

namespace rapide::serve {

// The field's request; nullopt when absent or null. Throws ApiError(400) naming
// "compression" for a malformed one.
std::optional<compress::CompressionRequest> read_compression_field(const nlohmann::json& body);

struct CompressionOutcome {
  compress::CompressionReport report;
  double ratio = 1.0;
  int64_t removed_prompt_tokens = 0;  // served-model tokens the compression took out
  // The usage extension, once the compressed prompt's length is known.
  nlohmann::json usage(int64_t compressed_prompt_tokens) const;
};

// Owns the scoring model, built on the first request that asks for compression (a server
// that never compresses pays nothing). Requests are compressed one at a time.
class RequestCompressor {
 public:
  // `scoring_file`: --compressor-model, or the served model's file. `served_parameters`
  // sizes the first prefill estimate before the engine has measured one.
  RequestCompressor(std::shared_ptr<const ModelFile> scoring_file, int threads,
                    uint64_t served_parameters);

  // Rewrites the body's prompt or message contents in place (delimiters removed).
  // `prefill_seconds_per_token`: the engine's measured prefill cost, 0 when none yet.
  // Throws ApiError(400) for a prompt that is not text or malformed delimiters.
  CompressionOutcome compress_body(nlohmann::json& body, api::Endpoint endpoint,
                                   compress::CompressionRequest request,
                                   const Tokenizer& served_tokenizer,
                                   double prefill_seconds_per_token);

 private:
  std::shared_ptr<const ModelFile> file_;
  int threads_;
  uint64_t served_parameters_;
  std::mutex mutex_;
  std::unique_ptr<compress::TokenScorer> scorer_;
};

}  // namespace rapide::serve
