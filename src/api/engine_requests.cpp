#include "api/engine_requests.h"

#include "api/api_error.h"
#include "base/error.h"

namespace rapide::api {

const char* prompt_param(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "messages" : "prompt";
}

uint64_t choice_seed(uint64_t request_seed, int i) {
  return request_seed + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
}

void check_admissible(const Engine& engine, const GenerationSpec& spec) {
  for (const auto& prompt : spec.prompts) {
    try {
      engine.check_admissible(prompt, spec.sampling);
    } catch (const Error& e) {
      throw api_error_from(e, prompt_param(spec.endpoint));
    }
  }
}

std::vector<RequestId> submit_choices(
    Engine& engine, const GenerationSpec& spec,
    const std::function<std::shared_ptr<EventSink>(size_t choice)>& sink_for) {
  const size_t n = static_cast<size_t>(spec.n);
  std::vector<RequestId> ids;
  ids.reserve(spec.prompts.size() * n);
  try {
    for (size_t p = 0; p < spec.prompts.size(); ++p) {
      for (size_t i = 0; i < n; ++i) {
        Request request;
        request.prompt = spec.prompts[p];
        request.sampling = spec.sampling;
        request.sampling.seed = choice_seed(spec.sampling.seed, static_cast<int>(i));
        request.sink = sink_for(p * n + i);
        ids.push_back(engine.submit(std::move(request)));
      }
    }
  } catch (const Error& e) {
    // All or nothing: a request the client sees refused must not keep generating.
    for (const RequestId id : ids) engine.abort(id);
    throw api_error_from(e, prompt_param(spec.endpoint));
  }
  return ids;
}

}  // namespace rapide::api
