// The lines of the output and error files, in the OpenAI Batch API output shape.
//
// Output: {"id": "batch_req_<line>", "custom_id", "response": {"status_code": 200,
// "request_id", "body": <the server's non-streaming response body>}, "error": null}.
// Errors: {"id", "custom_id" (null when unknown), "line", "response": {"status_code",
// "request_id", "body": <the server's error body>} or null, "error": {"code", "message",
// "param"}}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batch/batch_request.h"
#include "engine/request.h"
#include "serve/openai_responses.h"
#include "tokenizer/tokenizer.h"

namespace rapide::batch {

// One choice's outcome, gathered from its token events as the server gathers them.
struct ChoiceOutcome {
  bool done = false;
  std::string text;
  FinishReason reason = FinishReason::kLength;
  std::string error;
  std::vector<serve::LogprobEntry> logprobs;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t tokens_seen = 0;  // token events so far (live progress before the final count)

  // Adds a token event (the same rules as serve/generation.cpp's GenerationJob::on_event).
  void add(TokenEvent&& event, bool want_logprobs);
};

// The record of a request whose choices all finished: the output line, or (when a choice
// failed in the engine) the error line the server's 500 corresponds to. `is_error` says
// which file it belongs to.
struct FinishedRecord {
  std::string text;
  bool is_error = false;
};
FinishedRecord finished_record(const BatchRequest& request, const serve::ResponseHeader& header,
                               const std::vector<ChoiceOutcome>& choices,
                               const Tokenizer& tokenizer);

std::string error_record(const LineError& error);

}  // namespace rapide::batch
