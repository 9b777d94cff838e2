#include "batch/batch_request.h"

#include "api/engine_requests.h"
#include "api/front_end.h"
#include "api/json_limited.h"
#include "base/error.h"
#include "batch/batch_seed.h"
#include "batch/fnv1a.h"

namespace rapide::batch {

using nlohmann::json;

namespace {

LineError envelope_error(const BatchRequest& request, std::optional<std::string> custom_id,
                         std::string code, std::string message, std::string param = {}) {
  LineError e;
  e.line = request.line;
  e.digest = request.digest;
  e.custom_id = std::move(custom_id);
  e.code = std::move(code);
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

}  // namespace

std::optional<std::string> custom_id_of(const json& entry) {
  if (!entry.is_object()) return std::nullopt;
  const auto id = entry.find("custom_id");
  if (id == entry.end() || !id->is_string() || id->get<std::string>().empty()) return std::nullopt;
  return id->get<std::string>();
}

LineError line_error(const BatchRequest& request, const api::ApiError& error) {
  LineError e;
  e.line = request.line;
  e.digest = request.digest;
  e.custom_id = request.custom_id;
  e.code = error.code().empty() ? error.type() : error.code();
  e.message = error.what();
  e.param = error.param();
  e.status = error.status();
  e.body = json::parse(error.to_json());
  return e;
}

RequestParser::RequestParser(const Engine& engine, const api::ChatPrompter& chat,
                             std::string model_id)
    : engine_(engine), chat_(chat), model_id_(std::move(model_id)) {}

std::variant<BatchRequest, LineError> RequestParser::parse(const std::string& text, uint64_t line) {
  BatchRequest request;
  request.line = line;
  request.digest = fnv1a64(text);
  json entry;
  try {
    // Bounded nesting: a deep line must be this line's error, not a stack overflow later.
    entry = api::parse_json_limited(text, "the line");
  } catch (const api::ApiError& e) {
    return envelope_error(request, std::nullopt, "invalid_json", e.what());
  }
  if (!entry.is_object()) {
    return envelope_error(request, std::nullopt, "invalid_request",
                          "the line must be a JSON object");
  }
  std::optional<std::string> id = custom_id_of(entry);
  if (!id) {
    return envelope_error(request, std::nullopt, "invalid_custom_id",
                          "'custom_id' must be a non-empty string", "custom_id");
  }
  const std::string custom_id = *id;
  request.custom_id = custom_id;
  const auto method = entry.find("method");
  if (method == entry.end() || !method->is_string() || method->get<std::string>() != "POST") {
    return envelope_error(request, custom_id, "invalid_method", "'method' must be \"POST\"",
                          "method");
  }
  const auto url = entry.find("url");
  const std::string url_text =
      url != entry.end() && url->is_string() ? url->get<std::string>() : "";
  const std::optional<api::Endpoint> endpoint = api::endpoint_for_path(url_text);
  if (!endpoint) {
    return envelope_error(
        request, custom_id, "invalid_url",
        fmt::format("'url' must be /v1/completions or /v1/chat/completions, got {}",
                    url != entry.end() ? url->dump() : "nothing"),
        "url");
  }
  const auto body = entry.find("body");
  if (body == entry.end() || !body->is_object()) {
    return envelope_error(request, custom_id, "invalid_body", "'body' must be a JSON object",
                          "body");
  }
  try {
    request.spec = api::parse_request(*body, *endpoint, engine_.tokenizer());
    api::GenerationSpec& spec = request.spec;
    api::check_front_end(spec, model_id_, api::FrontEnd::kBatch);
    chat_.fill_prompt(spec);
    if (!spec.seed_given) spec.sampling.seed = derive_seed(custom_id);
    api::check_admissible(engine_, spec);
    return request;
  } catch (const api::ApiError& e) {
    return line_error(request, e);
  } catch (const Error& e) {
    return line_error(request, api::api_error_from(e));
  }
}

}  // namespace rapide::batch
