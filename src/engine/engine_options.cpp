#include "engine/engine_options.h"

#include "base/error.h"

namespace rapide {

BatchingMode parse_batching_mode(const std::string& text) {
  if (text == "continuous") return BatchingMode::kContinuous;
  if (text == "static") return BatchingMode::kStatic;
  fail(ErrorCode::kInvalidArgument, "batching mode must be 'continuous' or 'static', got '{}'",
       text);
}

const char* batching_mode_name(BatchingMode mode) {
  return mode == BatchingMode::kContinuous ? "continuous" : "static";
}

}  // namespace rapide
