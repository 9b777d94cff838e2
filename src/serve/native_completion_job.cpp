#include "serve/native_completion_job.h"

#include <boost/asio/post.hpp>

#include "api/api_error.h"
#include "api/engine_requests.h"
#include "api/openai_responses.h"
#include "serve/sse.h"

namespace rapide::serve {

namespace {

constexpr const char* kJson = "application/json";

// The engine-side end of a prompt: hands each event to the job on its connection's strand.
// Runs on the engine thread, so it only posts; a job already gone drops the event.
class NativeSink final : public EventSink {
 public:
  NativeSink(std::weak_ptr<NativeCompletionJob> job, boost::asio::any_io_executor executor,
             size_t index)
      : job_(std::move(job)), executor_(std::move(executor)), index_(index) {}

  void on_event(TokenEvent&& event) override {
    std::shared_ptr<NativeCompletionJob> job = job_.lock();
    if (!job) return;
    boost::asio::post(executor_,
                      [job = std::move(job), index = index_, event = std::move(event)]() mutable {
                        job->on_event(index, std::move(event));
                      });
  }

 private:
  std::weak_ptr<NativeCompletionJob> job_;
  boost::asio::any_io_executor executor_;
  size_t index_;
};

}  // namespace

void NativeCompletionJob::start(const NativeJobContext& context, llama::NativeCompletion request,
                                std::shared_ptr<HttpExchange> exchange) {
  auto job =
      std::make_shared<NativeCompletionJob>(context, std::move(request), std::move(exchange));
  job->submit_all();
}

NativeCompletionJob::NativeCompletionJob(const NativeJobContext& context,
                                         llama::NativeCompletion request,
                                         std::shared_ptr<HttpExchange> exchange)
    : context_(context), request_(std::move(request)), exchange_(std::move(exchange)) {}

void NativeCompletionJob::submit_all() {
  Engine& engine = *context_.engine;
  api::check_admissible(engine, request_.spec);
  std::vector<RequestId> ids;
  try {
    ids = api::submit_choices(engine, request_.spec, [this](size_t index) {
      return std::make_shared<NativeSink>(weak_from_this(), exchange_->executor(), index);
    });
  } catch (const api::ApiError&) {
    closed_ = true;
    throw;
  }
  states_.resize(ids.size());
  outcomes_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    states_[i].id = ids[i];
    states_[i].done.outcome = &outcomes_[i];
  }
  remaining_ = ids.size();
  auto self = shared_from_this();
  exchange_->on_client_gone([self] { self->client_gone(); });
  if (request_.spec.stream) exchange_->start_stream(std::string(kSseContentType));
}

void NativeCompletionJob::client_gone() {
  if (closed_) return;
  closed_ = true;
  for (size_t i = 0; i < outcomes_.size(); ++i) {
    if (!outcomes_[i].done) context_.engine->abort(states_[i].id);
  }
  context_.metrics->observe_status(context_.label, 499);
}

void NativeCompletionJob::on_event(size_t index, TokenEvent&& event) {
  if (closed_) return;
  PromptState& state = states_[index];
  api::ChoiceOutcome& outcome = outcomes_[index];
  const int32_t token = event.token;
  const std::string text = event.text;
  const bool finished = event.finished;
  if (token >= 0) state.done.tokens.push_back(token);
  if (finished) {
    const RequestMetrics& m = event.metrics;
    state.done.prompt_seconds = m.prefill_seconds;
    state.done.predict_seconds =
        event.completion_tokens > 0 ? std::max(0.0, m.e2e_seconds - m.ttft_seconds) : 0.0;
    SequenceObservation o;
    o.prompt_tokens = event.prompt_tokens;
    o.cached_prompt_tokens = event.cached_prompt_tokens;
    o.e2e = m.e2e_seconds;
    if (event.completion_tokens > 0) o.ttft = m.ttft_seconds;
    if (event.completion_tokens > 1) o.tpot = m.tpot_seconds;
    context_.metrics->observe_sequence(o);
    if (RequestRecord* r = context_.record.get()) {
      r->prompt_tokens = std::max<int64_t>(r->prompt_tokens, 0) + event.prompt_tokens;
      r->completion_tokens = std::max<int64_t>(r->completion_tokens, 0) + event.completion_tokens;
      r->finish_reason = finish_reason_name(event.finish_reason);
    }
    --remaining_;
  }
  const int32_t evaluated = static_cast<int32_t>(
      request_.spec.prompts[index / static_cast<size_t>(request_.spec.n)].size());
  outcome.add(std::move(event), request_.spec.logprobs);
  if (request_.spec.stream) {
    // A token event: its text (empty while a UTF-8 character is incomplete) and id. The
    // token that ends a prompt without text (EOS, a stop) is not streamed, as llama-server.
    if (token >= 0 && (!finished || !text.empty())) {
      const api::LogprobEntry* probs = nullptr;
      if (outcome.logprobs.size() > state.probs_sent) {
        probs = &outcome.logprobs.back();
        state.probs_sent = outcome.logprobs.size();
      }
      exchange_->stream(sse_event(
          api::dump_json(llama::partial_json(request_, index, text, token, outcome.tokens_seen,
                                             evaluated, probs, context_.engine->tokenizer()))));
    }
    if (finished) {
      if (outcome.reason == FinishReason::kError) {
        exchange_->stream(
            sse_event(api::generation_failed(outcome.error, outcome.error_code).to_json()));
      } else {
        exchange_->stream(sse_event(api::dump_json(answer(index, true))));
      }
    }
  }
  if (remaining_ == 0) finish();
}

nlohmann::json NativeCompletionJob::answer(size_t index, bool streamed) const {
  const std::vector<int32_t>& prompt =
      request_.spec.prompts[index / static_cast<size_t>(request_.spec.n)];
  return llama::select_fields(
      llama::completion_json(request_, index, states_[index].done, prompt,
                             context_.engine->tokenizer(), context_.model_id,
                             context_.engine->max_context(), streamed),
      request_.response_fields);
}

void NativeCompletionJob::finish() {
  closed_ = true;
  if (request_.spec.stream) {
    exchange_->end_stream();
    context_.metrics->observe_status(context_.label, 200);
    return;
  }
  if (const api::ChoiceOutcome* failed = api::first_failure(outcomes_)) {
    const api::ApiError error = api::generation_failed(failed->error, failed->error_code);
    exchange_->respond(error.status(), kJson, error.to_json());
    context_.metrics->observe_status(context_.label, error.status());
    return;
  }
  nlohmann::json body;
  if (request_.batch || outcomes_.size() > 1) {
    body = nlohmann::json::array();
    for (size_t i = 0; i < outcomes_.size(); ++i) body.push_back(answer(i, false));
  } else {
    body = answer(0, false);
  }
  exchange_->respond(200, kJson, api::dump_json(body));
  context_.metrics->observe_status(context_.label, 200);
}

}  // namespace rapide::serve
