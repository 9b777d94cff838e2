#include "formats/model_json.h"

#include "base/error.h"
#include "base/json_nesting.h"

namespace rapide {

nlohmann::json parse_model_json(std::string_view text, std::string_view what) {
  if (json_nesting_exceeds(text)) {
    fail(ErrorCode::kCorrupt, "{} nests arrays/objects more than {} levels deep", what,
         kMaxJsonDepth);
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorrupt, "{} is not valid JSON: {}", what, e.what());
  }
}

}  // namespace rapide
