// Parsing the JSON inside model files and folders (config.json, tokenizer.json,
// tokenizer_config.json, the safetensors header and index): the loaders walk some of it
// recursively (pre-tokenizer sequences), so nesting is bounded as for requests
// (base/json_nesting.h), and every parser failure is a corrupt model.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace rapide {

// Throws Error(kCorrupt) "<what> is not valid JSON: ..." or "<what> nests arrays/objects
// more than N levels deep". `what` names the file, e.g. "'dir': tokenizer.json".
nlohmann::json parse_model_json(std::string_view text, std::string_view what);

}  // namespace rapide
