// Sends benchmark requests to an OpenAI-compatible server (rapide serve, llama.cpp's server,
// vLLM, TGI) as streaming /v1/completions or /v1/chat/completions calls.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "loadgen/backend.h"
#include "loadgen/http_client.h"

namespace rapide::loadgen {

struct HttpBackendOptions {
  HttpTarget target;
  bool chat = false;  // /v1/chat/completions with messages, else /v1/completions with a prompt
  std::string model;  // the "model" field
  std::string api_key;
  double temperature = 0.0;
  // Send ignore_eos and min_tokens so every request generates exactly max_tokens; turn off
  // for servers that reject unknown fields.
  bool force_length = true;
  nlohmann::json response_format;  // sent when not null
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

class HttpBackend final : public Backend {
 public:
  HttpBackend(boost::asio::io_context& io, HttpBackendOptions options);
  void send(const BenchRequest& request, TimePoint start, RequestRecord record,
            RecordHandler done) override;
  std::string describe() const override;
  // The JSON body for one request (exposed for tests).
  std::string body(const BenchRequest& request) const;

 private:
  boost::asio::io_context& io_;
  HttpBackendOptions options_;
};

}  // namespace rapide::loadgen
