#include "engine/output_processor.h"

#include <algorithm>
#include <cstring>

#include "sampling/finish_reason.h"

namespace rapide {

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, int vocab_size, ThreadPool& pool)
    : tokenizer_(tokenizer),
      vocab_(static_cast<size_t>(vocab_size)),
      pool_(pool),
      logits_scratch_(static_cast<size_t>(pool.size()), std::vector<float>(vocab_)) {}

void OutputProcessor::add(RequestId id, RequestOutputState state) {
  states_.erase(id);
  states_.emplace(id, std::move(state));
}

// Samplers belong to one sequence each and read only its own history, so the rows are
// sampled in parallel (a batch of hundreds of rows spent a tenth of its step here on one
// thread); what follows a token (stop strings, finishing) stays in row order.
StepResult OutputProcessor::process(const StepPlan& plan, std::span<const float> logits,
                                    const Scheduler& scheduler) {
  rows_.clear();
  size_t row = 0;
  for (const ScheduledSequence& s : plan.sequences) {
    row += static_cast<size_t>(s.logits_rows);
    if (s.logits_rows == 0 || s.padding) continue;
    const auto state = states_.find(s.request_id);
    const Sequence* sequence = scheduler.get(s.request_id);
    if (state == states_.end() || sequence == nullptr) continue;
    // One token per sequence today: its last row (drafts would add rows before it).
    rows_.push_back({s.request_id, &state->second, sequence, logits.data() + (row - 1) * vocab_});
  }
  sampled_.resize(rows_.size());
  // A chunk is at least ~32k logits: a small vocabulary's rows stay on the calling thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / static_cast<int64_t>(vocab_));
  pool_.parallel_for(static_cast<int64_t>(rows_.size()), grain,
                     [&](int64_t begin, int64_t end, int thread) {
                       std::vector<float>& scratch = logits_scratch_[static_cast<size_t>(thread)];
                       for (int64_t i = begin; i < end; ++i) {
                         const Row& r = rows_[static_cast<size_t>(i)];
                         Sampled& out = sampled_[static_cast<size_t>(i)];
                         out.error.clear();
                         std::memcpy(scratch.data(), r.logits, vocab_ * sizeof(float));
                         try {
                           out.result = r.state->sampler->sample(scratch, r.sequence->tokens);
                         } catch (const std::exception& e) {
                           out.error = std::string("sampling failed: ") + e.what();
                         }
                       }
                     });

  StepResult result;
  result.step = plan.step;
  result.outputs.resize(rows_.size());
  pending_.resize(rows_.size());
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    SequenceOutput& out = result.outputs[i];
    out.request_id = r.id;
    pending_[i].clear();
    if (!sampled_[i].error.empty()) {
      out.finish = FinishReason::kError;
      out.error = sampled_[i].error;
      continue;
    }
    const SampleResult& sampled = sampled_[i].result;
    std::optional<FinishReason> reason;
    pending_[i].push_back(
        token_event(r.id, *r.state, *r.sequence, sampled, r.sequence->generated() + 1, reason));
    const TokenEvent& event = pending_[i].back();
    out.tokens.push_back({sampled.token, event.logprob, event.top_logprobs});
    out.finish = reason;
  }
  return result;
}

TokenEvent OutputProcessor::token_event(RequestId id, RequestOutputState& state,
                                        const Sequence& s, const SampleResult& r,
                                        int32_t generated, std::optional<FinishReason>& reason) {
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
  }
  if (!reason && generated >= s.max_generated) reason = FinishReason::kLength;
  return event;
}

void OutputProcessor::emit(const StepResult& result,
                           const std::vector<FinishedRequest>& finished) {
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
  if (state.detokenizer && !stopped_by_string) {
    std::string rest = state.detokenizer->flush();
    if (state.stop_checker) {
      StopOutput out = state.stop_checker->push(rest);
      event.text += out.text;
      if (!out.stopped) event.text += state.stop_checker->flush();
    } else {
      event.text += rest;
    }
  }
  event.finished = true;
  event.finish_reason = f.reason;
  event.error = f.error;
  event.prompt_tokens = f.prompt_tokens;
  event.completion_tokens = f.completion_tokens;
  event.cached_prompt_tokens = f.cached_prompt_tokens;
  event.timings = f.timings;
  event.metrics = request_metrics(f.timings, f.completion_tokens);
  if (state.sink) state.sink->on_event(std::move(event));
}

}  // namespace rapide
