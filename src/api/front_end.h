// What a front end accepts of a parsed request beyond the protocol itself: the model it
// runs, and (a batch) no streaming. A body is refused with the same status, code and param
// whether it reaches `rapide serve` or a `rapide batch` line; only the sentence naming the
// front end differs ("this server serves 'x'" / "this batch runs 'x'").
#pragma once

#include <string>

#include "api/api_error.h"
#include "api/openai_protocol.h"

namespace rapide::api {

enum class FrontEnd { kServer, kBatch };

// 404 "model" model_not_found: "the model '<model>' does not exist", then "; <detail>" when
// a detail is given. Also the server's answer to GET /v1/models/<unknown>.
ApiError model_not_found(const std::string& model, const std::string& detail = {});

// Throws ApiError: 400 "stream" for a streamed batch request, 404 "model" when the body
// names a model other than `model_id` (no "model" at all means the one that runs).
void check_front_end(const GenerationSpec& spec, const std::string& model_id, FrontEnd front_end);

}  // namespace rapide::api
