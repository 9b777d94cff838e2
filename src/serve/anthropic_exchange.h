// The HTTP side of the Anthropic Messages API (api/anthropic_messages.h): an exchange that
// sits between the chat completions code and the client's connection and rewrites what that
// code writes into Anthropic's shapes. A 200 chat.completion body becomes a message object
// (other 200 bodies, count_tokens', pass as they are), any other status's body Anthropic's
// error object, and the SSE stream's chunks Anthropic's events; headers, streaming and
// disconnects pass through unchanged.
//
// So POST /v1/messages runs the chat completions path as it is (parsing on a worker, the
// generation job, its error answers) and no OpenAI-shaped byte reaches an Anthropic client.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/anthropic_messages.h"
#include "serve/http_exchange.h"

namespace rapide::serve {

class AnthropicExchange final : public HttpExchange {
 public:
  explicit AnthropicExchange(std::shared_ptr<HttpExchange> inner) : inner_(std::move(inner)) {}

  // The prompt's tokens, for the stream's message_start (before start_stream).
  void set_input_tokens(int64_t tokens) { input_tokens_ = tokens; }

  boost::asio::any_io_executor executor() override { return inner_->executor(); }
  std::string peer() const override { return inner_->peer(); }
  void add_header(std::string name, std::string value) override {
    inner_->add_header(std::move(name), std::move(value));
  }
  void respond(int status, const std::string& content_type, std::string body,
               const HeaderList& headers = {}) override;
  void start_stream(const std::string& content_type) override;
  void stream(std::string data) override;
  void end_stream() override { inner_->end_stream(); }
  void on_client_gone(std::function<void()> callback) override {
    inner_->on_client_gone(std::move(callback));
  }

 private:
  std::shared_ptr<HttpExchange> inner_;
  int64_t input_tokens_ = 0;
  std::optional<api::AnthropicStream> stream_;
};

}  // namespace rapide::serve
