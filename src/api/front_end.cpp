#include "api/front_end.h"

#include <fmt/format.h>

namespace rapide::api {

ApiError model_not_found(const std::string& model, const std::string& detail) {
  std::string message = fmt::format("the model '{}' does not exist", model);
  if (!detail.empty()) message += "; " + detail;
  return ApiError(404, std::move(message), "model", "model_not_found");
}

void check_front_end(const GenerationSpec& spec, const std::string& model_id, FrontEnd front_end) {
  const bool batch = front_end == FrontEnd::kBatch;
  // A batch writes whole responses to a file: there is no connection to stream on.
  if (batch && spec.stream) {
    throw ApiError(400, "a batch request cannot stream; drop 'stream'", "stream", "unsupported");
  }
  if (!spec.model.empty() && spec.model != model_id) {
    throw model_not_found(
        spec.model,
        fmt::format("{} '{}'", batch ? "this batch runs" : "this server serves", model_id));
  }
}

}  // namespace rapide::api
