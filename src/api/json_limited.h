// The one way `rapide serve` and `rapide batch` parse untrusted JSON (request bodies, batch
// lines, journal records): bounded nesting, and every parser failure (syntax, a number out
// of double's range such as 1e400) reported as a 400 invalid_json instead of escaping as
// some other exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace rapide::api {

// Parses `text`. Throws ApiError(400, code "invalid_json") when it is not JSON, holds a
// number that does not fit a double, or nests deeper than kMaxJsonDepth (base/json_nesting.h).
// `what` names the text in messages ("the request body", "the line").
nlohmann::json parse_json_limited(std::string_view text, std::string_view what = "the JSON");

}  // namespace rapide::api
