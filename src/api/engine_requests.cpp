#include "api/engine_requests.h"

#include <algorithm>
#include <string_view>

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
  try {
    engine.check_speculation(spec.speculative);
  } catch (const Error& e) {
    throw api_error_from(e, "speculative");
  }
  const SamplingParams& p = spec.sampling;
  const uint64_t per_token = p.wants_logprobs() ? 1 + p.num_alternatives() : 1;
  uint64_t entries = 0;
  for (const auto& prompt : spec.prompts) {
    const int64_t room =
        static_cast<int64_t>(engine.max_context()) - static_cast<int64_t>(prompt.size());
    const uint64_t tokens = static_cast<uint64_t>(std::clamp<int64_t>(room, 0, p.max_tokens));
    entries += tokens * static_cast<uint64_t>(spec.n) * per_token;
  }
  if (entries > kMaxResponseEntries) {
    throw ApiError(400,
                   fmt::format("the response could hold {} tokens and logprob alternatives "
                               "(n x max_tokens x (1 + top_logprobs)), more than the limit of "
                               "{}; lower n, max_tokens or top_logprobs",
                               entries, kMaxResponseEntries),
                   "max_tokens", "response_too_large");
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
        request.speculative = spec.speculative;
        if (spec.parse_tool_calls) request.tool_calls = spec.tool_format;
        request.sampling.seed = choice_seed(spec.sampling.seed, static_cast<int>(i));
        request.sink = sink_for(p * n + i);
        ids.push_back(engine.submit(std::move(request)));
      }
    }
  } catch (const Error& e) {
    // All or nothing: a request the client sees refused must not keep generating.
    for (const RequestId id : ids) engine.abort(id);
    // The engine's grammar errors ("grammar: ...") are about the constraint's field.
    const bool about_grammar =
        spec.sampling.constraint && std::string_view(e.what()).starts_with("grammar:");
    throw api_error_from(e, about_grammar ? spec.constraint_param : prompt_param(spec.endpoint));
  }
  return ids;
}

}  // namespace rapide::api
