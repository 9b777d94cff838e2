#include "api/front_end.h"

#include <fmt/format.h>

#include "api/api_error.h"

namespace rapide::api {

void check_front_end(const GenerationSpec& spec, const std::string& model_id, FrontEnd front_end) {
  const bool batch = front_end == FrontEnd::kBatch;
  // A batch writes whole responses to a file: there is no connection to stream on.
  if (batch && spec.stream) {
    throw ApiError(400, "a batch request cannot stream; drop 'stream'", "stream", "unsupported");
  }
  if (!spec.model.empty() && spec.model != model_id) {
    throw ApiError(404,
                   fmt::format("the model '{}' does not exist; {} '{}'", spec.model,
                               batch ? "this batch runs" : "this server serves", model_id),
                   "model", "model_not_found");
  }
}

}  // namespace rapide::api
