#include "api/json_limited.h"

#include <fmt/format.h>

#include "api/api_error.h"
#include "base/json_nesting.h"

namespace rapide::api {

nlohmann::json parse_json_limited(std::string_view text, std::string_view what) {
  if (json_nesting_exceeds(text)) {
    throw ApiError(
        400, fmt::format("{} nests arrays/objects more than {} levels deep", what, kMaxJsonDepth),
        {}, "invalid_json");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ApiError(400,
                   fmt::format("{} is not valid JSON: {} (at byte {})", what, e.what(), e.byte), {},
                   "invalid_json");
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number literal beyond double's range (1e400).
    throw ApiError(400, fmt::format("{} is not valid JSON: {}", what, e.what()), {},
                   "invalid_json");
  }
}

}  // namespace rapide::api
