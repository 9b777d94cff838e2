#include "engine/output_processor.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "sampling/finish_reason.h"

namespace rapide {

namespace {

// A grammar that gives up on a token (it cost more than the per-token limit, or the request
// was cancelled during the mask's walk) ends its own request; the step's other rows go on.
void end_on_grammar_error(const Error& e, SequenceOutput& out) {
  out.finish = e.code() == ErrorCode::kCancelled ? FinishReason::kAbort : FinishReason::kError;
  out.error = e.what();
  out.error_code = e.code();
}

}  // namespace

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, int vocab_size, ThreadPool& pool)
    : tokenizer_(tokenizer),
      vocab_(static_cast<size_t>(vocab_size)),
      pool_(pool),
      logits_scratch_(static_cast<size_t>(pool.size()), std::vector<float>(vocab_)) {}

void OutputProcessor::add(RequestId id, RequestOutputState state) {
  states_.erase(id);
  states_.emplace(id, std::move(state));
}

// Samplers belong to one sequence each and read only its own history, and what follows a
// token (detokenizer, stop strings) is the request's own state too, so sequences are processed
// in parallel (a batch of hundreds of rows spent a tenth of its step here on one thread);
// events still go out in row order, from emit().
StepResult OutputProcessor::process(const StepPlan& plan, std::span<const float> logits,
                                    const Scheduler& scheduler) {
  rows_.clear();
  size_t row = 0;
  for (const ScheduledSequence& s : plan.sequences) {
    const size_t first = row;
    row += static_cast<size_t>(s.logits_rows);
    if (s.logits_rows == 0 || s.padding) continue;
    const auto state = states_.find(s.request_id);
    const Sequence* sequence = scheduler.get(s.request_id);
    if (state == states_.end() || sequence == nullptr) continue;
    rows_.push_back({s.request_id, &state->second, sequence, &s, logits.data() + first * vocab_});
  }
  StepResult result;
  result.step = plan.step;
  result.outputs.resize(rows_.size());
  pending_.resize(rows_.size());
  // A chunk is at least ~32k logits: a small vocabulary's rows stay on the calling thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / static_cast<int64_t>(vocab_));
  pool_.parallel_for(static_cast<int64_t>(rows_.size()), grain,
                     [&](int64_t begin, int64_t end, int thread) {
                       std::vector<float>& scratch = logits_scratch_[static_cast<size_t>(thread)];
                       for (int64_t i = begin; i < end; ++i) {
                         const size_t r = static_cast<size_t>(i);
                         pending_[r].clear();
                         process_row(rows_[r], scratch, result.outputs[r], pending_[r]);
                       }
                     });
  return result;
}

void OutputProcessor::process_row(const Row& row, std::vector<float>& scratch, SequenceOutput& out,
                                  std::vector<TokenEvent>& events) {
  out.request_id = row.id;
  const std::vector<int32_t>& drafts = row.planned->draft_tokens;
  const std::vector<std::vector<Candidate>>& distributions = row.planned->draft_distributions;
  const auto draft_q = [&](size_t j) -> std::span<const Candidate> {
    if (j < distributions.size()) return distributions[j];
    return {};
  };
  Sampler& sampler = *row.state->sampler;
  // Verifying guesses extends the history token by token; a plain decode reads it in place.
  std::vector<int32_t> extended;
  if (!drafts.empty()) extended = row.sequence->tokens;
  std::span<const int32_t> history = row.sequence->tokens;
  int32_t generated = row.sequence->generated();
  for (size_t j = 0; j <= drafts.size(); ++j) {
    std::memcpy(scratch.data(), row.logits + j * vocab_, vocab_ * sizeof(float));
    // The grammar's mask goes first, so penalties, truncation and the draw only ever see
    // tokens that keep the output valid.
    if (row.state->grammar) {
      size_t allowed = 0;
      try {
        allowed = row.state->grammar->apply(scratch);
      } catch (const Error& e) {
        end_on_grammar_error(e, out);
        return;
      }
      if (allowed == 0) {
        out.finish = FinishReason::kError;
        // The request's constraint asks for text the model's vocabulary cannot spell: a
        // problem of the request (and model), not of the server.
        out.error =
            "grammar: no token of the model's vocabulary can continue the output the grammar "
            "requires";
        out.error_code = ErrorCode::kUnsupported;
        return;
      }
    }
    SampleResult r;
    try {
      r = j < drafts.size() ? sampler.verify(scratch, history, drafts[j], draft_q(j))
                            : sampler.sample(scratch, history);
    } catch (const std::exception& e) {
      out.finish = FinishReason::kError;
      out.error = std::string("sampling failed: ") + e.what();
      return;
    }
    std::optional<FinishReason> reason;
    try {  // the grammar follows the token inside
      events.push_back(token_event(row.id, *row.state, *row.sequence, r, ++generated, reason));
    } catch (const Error& e) {
      end_on_grammar_error(e, out);
      return;
    }
    const TokenEvent& event = events.back();
    out.tokens.push_back({r.token, event.logprob, event.top_logprobs});
    // Nothing past a stop: a stop token, string or max_tokens inside an accepted run ends it.
    if (reason) {
      out.finish = reason;
      return;
    }
    if (j == drafts.size() || !r.draft_accepted) return;
    extended.push_back(r.token);
    history = extended;
  }
}

TokenEvent OutputProcessor::token_event(RequestId id, RequestOutputState& state, const Sequence& s,
                                        const SampleResult& r, int32_t generated,
                                        std::optional<FinishReason>& reason) {
  TokenEvent event;
  event.request_id = id;
  event.token = r.token;
  event.index = generated - 1;
  event.time = Clock::now();
  const SamplingParams& params = state.sampler->params();
  if (params.wants_logprobs()) {
    event.logprob = r.raw_logprob;
    event.top_logprobs.assign(r.top_logprobs.begin(), r.top_logprobs.end());
  }
  reason = finish_after_token(params, r.token, tokenizer_.is_end_of_generation(r.token), generated);
  // A complete grammar output ends the request as a stop would; its last token is text.
  const bool grammar_done =
      state.grammar && state.grammar->accept(r.token) && state.grammar->complete() && !reason;
  // Stop tokens (EOS, stop_token_ids) contribute no text; every other token, including
  // the one that reaches max_tokens, goes through the detokenizer and stop strings.
  if (reason != FinishReason::kStop && state.detokenizer) {
    std::string piece = state.detokenizer->push(r.token);
    if (state.stop_checker) {
      StopOutput out = state.stop_checker->push(piece);
      event.text = std::move(out.text);
      if (out.stopped) reason = FinishReason::kStop;
    } else {
      event.text = std::move(piece);
    }
    if (state.tool_calls) event.text = state.tool_calls->push(event.text);
  }
  event.text_offset = state.text_bytes;
  state.text_bytes += event.text.size();
  if (grammar_done && !reason) reason = FinishReason::kStop;
  if (!reason && generated >= s.max_generated) reason = FinishReason::kLength;
  return event;
}

void OutputProcessor::emit(const StepResult& result, const std::vector<FinishedRequest>& finished) {
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const SequenceOutput& out = result.outputs[i];
    const auto state = states_.find(out.request_id);
    if (state == states_.end()) continue;
    std::vector<TokenEvent>& events = pending_[i];
    const FinishedRequest* f = nullptr;
    if (out.finish) {
      for (const FinishedRequest& candidate : finished) {
        if (candidate.request_id == out.request_id) f = &candidate;
      }
    }
    const size_t last_ordinary =
        f != nullptr && !events.empty() ? events.size() - 1 : events.size();
    for (size_t j = 0; j < last_ordinary; ++j) {
      if (state->second.sink) state->second.sink->on_event(std::move(events[j]));
    }
    if (f == nullptr) continue;
    TokenEvent final_event;
    if (!events.empty()) {
      final_event = std::move(events.back());
    } else {
      final_event.request_id = out.request_id;
      final_event.time = Clock::now();
    }
    send_final(state->second, final_event, *f);
    states_.erase(state);
  }
}

void OutputProcessor::emit_final(const FinishedRequest& finished) {
  const auto state = states_.find(finished.request_id);
  if (state == states_.end()) return;
  TokenEvent event;
  event.request_id = finished.request_id;
  event.time = Clock::now();
  send_final(state->second, event, finished);
  states_.erase(state);
}

void OutputProcessor::send_final(RequestOutputState& state, TokenEvent& event,
                                 const FinishedRequest& f) {
  const bool stopped_by_string = state.stop_checker && state.stop_checker->stopped();
  std::string tail;  // the text the last token left in the detokenizer and stop checker
  if (state.detokenizer && !stopped_by_string) {
    std::string rest = state.detokenizer->flush();
    if (state.stop_checker) {
      StopOutput out = state.stop_checker->push(rest);
      tail = std::move(out.text);
      if (!out.stopped) tail += state.stop_checker->flush();
    } else {
      tail = std::move(rest);
    }
  }
  if (state.tool_calls) {
    // The same parse of the whole output a non-streamed response would make.
    event.text += state.tool_calls->push(tail);
    ParsedToolCalls parsed = state.tool_calls->finish();
    event.text += parsed.content;
    event.tool_calls = std::move(parsed.calls);
  } else {
    event.text += tail;
  }
  if (event.token < 0) event.text_offset = state.text_bytes;  // an event of its own
  event.finished = true;
  event.finish_reason = f.reason;
  if (f.reason == FinishReason::kStop && state.stop_checker) {
    event.stop_string = state.stop_checker->matched();
  }
  event.error = f.error;
  event.error_code = f.error_code;
  event.kv_transfer = f.kv_transfer;
  event.prompt_tokens = f.prompt_tokens;
  event.completion_tokens = f.completion_tokens;
  event.cached_prompt_tokens = f.cached_prompt_tokens;
  event.timings = f.timings;
  event.metrics = request_metrics(f.timings, f.completion_tokens);
  if (state.sink) state.sink->on_event(std::move(event));
}

}  // namespace rapide
