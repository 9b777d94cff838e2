// POST /tokenize and POST /detokenize, answering in llama.cpp's and vLLM's shapes at once so
// clients of either work unchanged:
//
//   /tokenize    {"content": TEXT}              llama.cpp (add_special default false,
//                                               with_pieces: [{"id", "piece"}])
//                {"prompt": TEXT} | {"messages"} vLLM (add_special_tokens default true;
//                                               messages go through the chat template)
//             -> {"tokens": [...], "count": N, "max_model_len": M}
//   /detokenize  {"tokens": [ids]}
//             -> {"content": TEXT, "prompt": TEXT}
//
// Plain functions of the parsed body, so they are tested without HTTP. Throw ApiError(400)
// for a malformed body.
#pragma once

#include <nlohmann/json.hpp>

#include "api/chat.h"
#include "tokenizer/tokenizer.h"

namespace rapide::serve {

nlohmann::json tokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer,
                                 const api::ChatPrompter& chat, int max_model_len);

nlohmann::json detokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer);

}  // namespace rapide::serve
