#include "api/choice_outcome.h"

#include <algorithm>

namespace rapide::api {

void ChoiceOutcome::add(TokenEvent&& event, bool want_logprobs) {
  if (event.token >= 0) ++tokens_seen;
  if (event.token >= 0 && want_logprobs) {
    const bool silent_stop =
        event.finished && event.finish_reason == FinishReason::kStop && event.text.empty();
    if (!silent_stop) {
      LogprobEntry entry;
      entry.token = event.token;
      entry.text_offset = event.text_offset;
      entry.logprob = event.logprob;
      entry.top = std::move(event.top_logprobs);
      logprobs.push_back(std::move(entry));
    }
  }
  text += event.text;
  if (event.finished) {
    done = true;
    reason = event.finish_reason;
    stop_string = std::move(event.stop_string);
    tool_calls = std::move(event.tool_calls);
    error = std::move(event.error);
    prompt_tokens = event.prompt_tokens;
    completion_tokens = event.completion_tokens;
    cached_prompt_tokens = event.cached_prompt_tokens;
    error_code = event.error_code;
    kv_transfer = event.kv_transfer;
  }
}

Usage usage_of(std::span<const ChoiceOutcome> choices, int n) {
  Usage u;
  const size_t per_prompt = static_cast<size_t>(n);
  KvTransferReport kv;
  std::vector<int32_t> ranks;  // the prefill ranks that computed the prompts, once each
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutcome& c = choices[i];
    if (i % per_prompt == 0) {  // each prompt is counted once, whatever n
      u.prompt_tokens += c.prompt_tokens;
      u.cached_tokens += c.cached_prompt_tokens;
    }
    // Every choice of a prompt is its own engine request: each may have moved K/V.
    const KvTransferReport& r = c.kv_transfer;
    kv.remote = kv.remote || r.remote;
    kv.blocks += r.blocks;
    kv.bytes += r.bytes;
    kv.transfer_seconds = std::max(kv.transfer_seconds, r.transfer_seconds);
    kv.wait_seconds = std::max(kv.wait_seconds, r.wait_seconds);
    kv.prefill_seconds = std::max(kv.prefill_seconds, r.prefill_seconds);
    if (r.prefill_rank > 0 &&
        std::find(ranks.begin(), ranks.end(), r.prefill_rank) == ranks.end()) {
      ranks.push_back(r.prefill_rank);
    }
    u.completion_tokens += c.completion_tokens;
  }
  if (kv.remote) {
    u.kv_transfer = {{"blocks", kv.blocks},
                     {"bytes", kv.bytes},
                     {"transfer_ms", kv.transfer_seconds * 1e3},
                     {"wait_ms", kv.wait_seconds * 1e3},
                     {"prefill_ms", kv.prefill_seconds * 1e3},
                     {"prefill_ranks", ranks}};
  }
  return u;
}

const ChoiceOutcome* first_failure(std::span<const ChoiceOutcome> choices) {
  for (const ChoiceOutcome& c : choices) {
    if (c.reason == FinishReason::kError) return &c;
  }
  return nullptr;
}

nlohmann::json response_body(const GenerationSpec& spec, const ResponseHeader& header,
                             std::span<const ChoiceOutcome> choices, const Tokenizer& tokenizer) {
  std::vector<ChoiceResult> results;
  results.reserve(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutcome& c = choices[i];
    ChoiceResult r;
    r.index = static_cast<int>(i);
    r.text = c.text;
    r.finish_reason = finish_reason_name(c.reason);
    r.stop_string = c.stop_string;
    if (!c.tool_calls.empty()) {
      r.tool_calls = tool_calls_json(c.tool_calls);
      if (c.reason == FinishReason::kStop) r.finish_reason = "tool_calls";
    }
    if (spec.logprobs) r.logprobs = logprobs_json(spec.endpoint, tokenizer, c.logprobs);
    results.push_back(std::move(r));
  }
  Usage usage = usage_of(choices, spec.n);
  usage.compression = spec.compression_usage;
  return full_response(header, results, usage);
}

}  // namespace rapide::api
