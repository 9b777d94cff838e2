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

SpecMode parse_spec_mode(const std::string& text) {
  if (text == "off") return SpecMode::kOff;
  if (text == "ngram") return SpecMode::kNgram;
  if (text == "draft") return SpecMode::kDraft;
  fail(ErrorCode::kInvalidArgument, "--spec must be 'off', 'ngram' or 'draft', got '{}'", text);
}

const char* spec_mode_name(SpecMode mode) {
  switch (mode) {
    case SpecMode::kNgram:
      return "ngram";
    case SpecMode::kDraft:
      return "draft";
    case SpecMode::kOff:
      break;
  }
  return "off";
}

}  // namespace rapide
