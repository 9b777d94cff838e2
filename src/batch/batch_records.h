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

#include "api/choice_outcome.h"
#include "api/openai_responses.h"
#include "batch/batch_request.h"
#include "tokenizer/tokenizer.h"

namespace rapide::batch {

// The record of a request whose choices all finished: the output line, or (when a choice
// failed in the engine) the error line the server's 500 corresponds to. `is_error` says
// which file it belongs to.
struct FinishedRecord {
  std::string text;
  bool is_error = false;
};
FinishedRecord finished_record(const BatchRequest& request, const api::ResponseHeader& header,
                               const std::vector<api::ChoiceOutcome>& choices,
                               const Tokenizer& tokenizer);

std::string error_record(const LineError& error);

}  // namespace rapide::batch
