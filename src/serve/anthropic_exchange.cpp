#include "serve/anthropic_exchange.h"

#include "api/openai_responses.h"

namespace rapide::serve {

void AnthropicExchange::respond(int status, const std::string& content_type, std::string body,
                                const HeaderList& headers) {
  if (status == 200 && content_type == "application/json") {
    // A chat completion; other bodies (count_tokens') are Anthropic's already.
    const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
    if (parsed.is_object() && parsed.value("object", std::string()) == "chat.completion") {
      body = api::dump_json(api::anthropic_message(parsed));
    }
  } else if (status >= 400) {
    body = api::dump_json(api::anthropic_error(status, body));
  }
  inner_->respond(status, content_type, std::move(body), headers);
}

void AnthropicExchange::start_stream(const std::string& content_type) {
  stream_.emplace(input_tokens_);
  inner_->start_stream(content_type);
}

void AnthropicExchange::stream(std::string data) {
  std::string events = stream_ ? stream_->translate(data) : std::move(data);
  if (!events.empty()) inner_->stream(std::move(events));
}

}  // namespace rapide::serve
