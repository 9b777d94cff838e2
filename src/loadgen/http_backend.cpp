#include "loadgen/http_backend.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace rapide::loadgen {

HttpBackend::HttpBackend(boost::asio::io_context& io, HttpBackendOptions options)
    : io_(io), options_(std::move(options)) {}

std::string HttpBackend::body(const BenchRequest& request) const {
  nlohmann::json j;
  j["model"] = options_.model;
  if (options_.chat) {
    nlohmann::json messages = nlohmann::json::array();
    for (const ChatMessage& m : request.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    j["messages"] = std::move(messages);
  } else {
    j["prompt"] = render_prompt(request.messages);
  }
  j["max_tokens"] = request.max_tokens;
  j["temperature"] = options_.temperature;
  j["stream"] = true;
  // Usage in the last chunk gives exact token counts; chunks alone may merge tokens.
  j["stream_options"] = {{"include_usage", true}};
  if (!options_.response_format.is_null()) j["response_format"] = options_.response_format;
  if (options_.force_length) {
    j["ignore_eos"] = true;
    j["min_tokens"] = request.max_tokens;
  }
  return j.dump();
}

void HttpBackend::send(const BenchRequest& request, TimePoint start, RequestRecord record,
                       RecordHandler done) {
  HttpPost post;
  post.path = options_.chat ? "/v1/chat/completions" : "/v1/completions";
  post.body = body(request);
  post.api_key = options_.api_key;
  post.timeout = options_.timeout;
  post_streaming(io_, options_.target, std::move(post), start, std::move(record), std::move(done));
}

std::string HttpBackend::describe() const {
  return fmt::format("http://{}:{}{}{} (model '{}')", options_.target.host, options_.target.port,
                     options_.target.prefix,
                     options_.chat ? "/v1/chat/completions" : "/v1/completions", options_.model);
}

}  // namespace rapide::loadgen
