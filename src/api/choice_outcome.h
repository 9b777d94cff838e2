// One choice's outcome gathered from its engine token events, and the non-streamed response
// body of a request whose choices all finished: the same rules for `rapide serve` and
// `rapide batch`, so a batch line's body is the body the server would have answered.
//
// A token that ended the choice without text (end-of-generation, a stop token or the end of
// a stop string) is not part of the completion, so it gets no logprob entry. Usage counts
// each prompt once whatever n, and every choice's completion tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai_protocol.h"
#include "api/openai_responses.h"
#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace rapide::api {

struct ChoiceOutcome {
  bool done = false;
  std::string text;
  FinishReason reason = FinishReason::kLength;
  std::string stop_string;  // the stop string that ended it (TokenEvent::stop_string)
  // The tool calls the engine parsed out of the output (their text is not in `text`).
  std::vector<ToolCall> tool_calls;
  std::string error;
  // Every entry (non-streamed), or those not yet sent (the server's streams clear it).
  std::vector<LogprobEntry> logprobs;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  ErrorCode error_code = ErrorCode::kInternal;  // with an error: kUnavailable answers 503
  KvTransferReport kv_transfer;                 // disaggregation (engine/remote_prefill.h)
  int32_t tokens_seen = 0;  // token events so far (live progress before the final count)

  // Adds a token event. Takes the event's top_logprobs, error and tool calls; its text stays
  // readable.
  void add(TokenEvent&& event, bool want_logprobs);
};

// The usage of choices in choice order (index = prompt * n + i). Under disaggregation it
// carries "kv_transfer": {"blocks", "bytes", "transfer_ms", "wait_ms", "prefill_ms",
// "prefill_ranks"}: blocks and bytes summed over the prompts, the times of the slowest one,
// the MPI ranks that computed them (once each, in choice order).
Usage usage_of(std::span<const ChoiceOutcome> choices, int n);

// The first choice that failed inside the engine, or null. Such a request answers
// generation_failed(choice->error) instead of a body.
const ChoiceOutcome* first_failure(std::span<const ChoiceOutcome> choices);

// The whole non-streamed response of choices that all finished without failing.
nlohmann::json response_body(const GenerationSpec& spec, const ResponseHeader& header,
                             std::span<const ChoiceOutcome> choices, const Tokenizer& tokenizer);

}  // namespace rapide::api
