#include "serve/prompt_compression.h"

#include "api/api_error.h"
#include "base/error.h"
#include "compress/context_markup.h"

namespace rapide::serve {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw api::ApiError(400, message, "compression", "invalid_value");
}

// The string contents compression may rewrite: pointers into `body`.
std::vector<json*> compressible_texts(json& body, api::Endpoint endpoint) {
  std::vector<json*> texts;
  if (endpoint == api::Endpoint::kCompletions) {
    json* prompt = body.contains("prompt") ? &body["prompt"] : nullptr;
    if (prompt && prompt->is_array() && prompt->size() == 1) prompt = &(*prompt)[0];
    if (!prompt || !prompt->is_string()) {
      bad("'compression' needs 'prompt' to be one string with the context marked by "
          "<context>...</context>");
    }
    texts.push_back(prompt);
    return texts;
  }
  if (!body.contains("messages") || !body["messages"].is_array()) return texts;  // parse says
  for (json& message : body["messages"]) {
    if (message.is_object() && message.contains("content") && message["content"].is_string()) {
      texts.push_back(&message["content"]);
    }
  }
  return texts;
}

// Chat: the last user message that holds no context is the question.
std::string chat_question(const json& body) {
  const json& messages = body["messages"];
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (!it->is_object() || it->value("role", "") != "user") continue;
    const json& content = (*it)["content"];
    if (!content.is_string()) return {};
    const std::string text = content.get<std::string>();
    return text.find(compress::kContextOpen) == std::string::npos ? text : std::string();
  }
  return {};
}

}  // namespace

std::optional<compress::CompressionRequest> read_compression_field(const json& body) {
  const auto it = body.find("compression");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    bad("'compression' must be an object like {\"ratio\": 0.5}");
  }
  compress::CompressionRequest request;
  const json& v = *it;
  if (!v.contains("ratio") || !v["ratio"].is_number()) {
    bad("'compression.ratio' must be a number in (0, 1]");
  }
  request.ratio = v["ratio"].get<double>();
  if (!(request.ratio > 0.0 && request.ratio <= 1.0)) {
    bad(fmt::format("'compression.ratio' must be in (0, 1], got {}", v["ratio"].dump()));
  }
  if (v.contains("question") && !v["question"].is_null()) {
    if (!v["question"].is_string()) bad("'compression.question' must be a string");
    request.question = v["question"].get<std::string>();
  }
  if (v.contains("force") && !v["force"].is_null()) {
    if (!v["force"].is_boolean()) bad("'compression.force' must be a boolean");
    request.force = v["force"].get<bool>();
  }
  for (const auto& [key, value] : v.items()) {
    if (key != "ratio" && key != "question" && key != "force") {
      bad(fmt::format("'compression' has no field '{}' (ratio, question, force)", key));
    }
  }
  return request;
}

json CompressionOutcome::usage(int64_t compressed_prompt_tokens) const {
  json u = {{"applied", report.applied},
            {"ratio", ratio},
            {"original_prompt_tokens", compressed_prompt_tokens + removed_prompt_tokens},
            {"compressed_prompt_tokens", compressed_prompt_tokens},
            {"passages", report.passages},
            {"kept_passages", report.kept_passages},
            {"compression_ms", report.seconds * 1e3},
            {"estimated_scoring_ms", report.cost.scoring_seconds * 1e3},
            {"estimated_saved_prefill_ms", report.cost.saved_seconds * 1e3}};
  if (!report.applied) u["reason"] = report.reason;
  return u;
}

RequestCompressor::RequestCompressor(std::shared_ptr<const ModelFile> scoring_file, int threads,
                                     uint64_t served_parameters)
    : file_(std::move(scoring_file)), threads_(threads), served_parameters_(served_parameters) {}

CompressionOutcome RequestCompressor::compress_body(json& body, api::Endpoint endpoint,
                                                    compress::CompressionRequest request,
                                                    const Tokenizer& served_tokenizer,
                                                    double prefill_seconds_per_token) {
  std::vector<json*> fields = compressible_texts(body, endpoint);
  std::vector<std::string> texts;
  for (const json* f : fields) texts.push_back(f->get<std::string>());
  if (request.question.empty() && endpoint == api::Endpoint::kChat) {
    request.question = chat_question(body);
  }
  CompressionOutcome outcome;
  outcome.ratio = request.ratio;
  const std::lock_guard lock(mutex_);
  if (!scorer_) scorer_ = std::make_unique<compress::TokenScorer>(file_, threads_);
  if (prefill_seconds_per_token <= 0.0) {
    // No prefill measured yet: the scorer's own cost, scaled by the models' sizes.
    const double scorer_parameters =
        static_cast<double>(std::max<uint64_t>(1, scorer_->model().matmul_parameters()));
    prefill_seconds_per_token =
        scorer_->seconds_per_token() * static_cast<double>(served_parameters_) / scorer_parameters;
  }
  const std::vector<std::string> originals = texts;
  try {
    outcome.report =
        compress::PromptCompressor(*scorer_).compress(texts, request, prefill_seconds_per_token);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) bad(e.what());
    throw;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    // Tags stripped from the original too: the difference is what compression removed.
    const std::string stripped = compress::assemble(compress::parse_marked_prompt(originals[i]));
    outcome.removed_prompt_tokens +=
        static_cast<int64_t>(served_tokenizer.encode(stripped, false).size()) -
        static_cast<int64_t>(served_tokenizer.encode(texts[i], false).size());
    *fields[i] = texts[i];
  }
  return outcome;
}

}  // namespace rapide::serve
