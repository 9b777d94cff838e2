// libFuzzer target: arbitrary bytes as the body of POST /v1/completions and of POST
// /v1/chat/completions, through what the server runs before queueing a request: JSON
// parsing with limits, the protocol parser, front-end checks, the chat template and the
// engine's admission checks (routes.cpp / generation.cpp), on the built-in demo model.
// A body is accepted or refused with a 4xx; an exception of any other kind, or a refusal
// that would be a 5xx, is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/api_error.h"
#include "api/engine_requests.h"
#include "api/front_end.h"
#include "api/openai_protocol.h"
#include "base/error.h"
#include "fuzz_demo.h"

namespace {

void run(const std::string& body, rapide::api::Endpoint endpoint) {
  namespace api = rapide::api;
  rapide::fuzz::DemoServer& server = rapide::fuzz::demo_server();
  int status = 200;
  try {
    api::GenerationSpec spec =
        api::parse_request(api::parse_json_body(body), endpoint, *server.tokenizer);
    api::check_front_end(spec, rapide::serve::kDemoModelId, api::FrontEnd::kServer);
    server.chat.fill_prompt(spec);
    api::check_admissible(*server.engine, spec);
  } catch (const api::ApiError& e) {
    status = e.status();
  } catch (const rapide::Error& e) {
    status = api::api_error_from(e).status();
  }
  if (status >= 500) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  run(body, rapide::api::Endpoint::kCompletions);
  run(body, rapide::api::Endpoint::kChat);
  return 0;
}
