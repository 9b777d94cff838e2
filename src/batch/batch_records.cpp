#include "batch/batch_records.h"

#include "batch/record_journal.h"
#include "serve/api_error.h"

namespace rapide::batch {

using nlohmann::json;

void ChoiceOutcome::add(TokenEvent&& event, bool want_logprobs) {
  if (event.token >= 0) ++tokens_seen;
  if (event.token >= 0 && want_logprobs) {
    // A token that ended the choice without text (end-of-generation, a stop token or the end
    // of a stop string) is not part of the completion, so it has no logprob entry.
    const bool silent_stop =
        event.finished && event.finish_reason == FinishReason::kStop && event.text.empty();
    if (!silent_stop) {
      serve::LogprobEntry entry;
      entry.token = event.token;
      entry.logprob = event.logprob;
      entry.top = std::move(event.top_logprobs);
      logprobs.push_back(std::move(entry));
    }
  }
  text += event.text;
  if (event.finished) {
    done = true;
    reason = event.finish_reason;
    error = std::move(event.error);
    prompt_tokens = event.prompt_tokens;
    completion_tokens = event.completion_tokens;
    cached_prompt_tokens = event.cached_prompt_tokens;
  }
}

FinishedRecord finished_record(const BatchRequest& request, const serve::ResponseHeader& header,
                               const std::vector<ChoiceOutcome>& choices,
                               const Tokenizer& tokenizer) {
  const serve::GenerationSpec& spec = request.spec;
  serve::Usage usage;
  std::vector<serve::ChoiceResult> results;
  const size_t n = static_cast<size_t>(spec.n);
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutcome& c = choices[i];
    if (c.reason == FinishReason::kError) {
      // The server answers 500 for the whole request; a batch reports it as a failed line.
      const serve::ApiError error(500, "generation failed: " + c.error, {}, "engine_error");
      LineError e = line_error(request.line, request.custom_id, error);
      return {error_record(e), true};
    }
    if (i % n == 0) {  // each prompt is counted once, whatever n
      usage.prompt_tokens += c.prompt_tokens;
      usage.cached_tokens += c.cached_prompt_tokens;
    }
    usage.completion_tokens += c.completion_tokens;
    serve::ChoiceResult r;
    r.index = static_cast<int>(i);
    r.text = c.text;
    r.finish_reason = finish_reason_name(c.reason);
    if (spec.logprobs) {
      r.logprobs = spec.endpoint == serve::Endpoint::kChat
                       ? serve::chat_logprobs_json(tokenizer, c.logprobs)
                       : serve::completion_logprobs_json(tokenizer, c.logprobs, 0);
    }
    results.push_back(std::move(r));
  }
  const json record = {{"id", record_id(request.line)},
                       {"custom_id", request.custom_id},
                       {"response",
                        {{"status_code", 200},
                         {"request_id", header.id},
                         {"body", serve::full_response(header, results, usage)}}},
                       {"error", nullptr}};
  return {serve::dump_json(record), false};
}

std::string error_record(const LineError& e) {
  json response = nullptr;
  if (e.status) {
    response = {{"status_code", *e.status}, {"request_id", record_id(e.line)}, {"body", e.body}};
  }
  const json record = {{"id", record_id(e.line)},
                       {"custom_id", e.custom_id ? json(*e.custom_id) : json()},
                       {"line", e.line},
                       {"response", std::move(response)},
                       {"error",
                        {{"code", e.code},
                         {"message", e.message},
                         {"param", e.param.empty() ? json() : json(e.param)}}}};
  return serve::dump_json(record);
}

}  // namespace rapide::batch
