#include "serve/generation.h"

#include <boost/asio/post.hpp>

#include "api/api_error.h"
#include "api/engine_requests.h"
#include "base/error.h"
#include "base/logging.h"
#include "serve/sse.h"

namespace rapide::serve {

namespace {

// The engine-side end of a choice: hands each event to the job on its connection's strand.
// Runs on the engine thread, so it only posts; a job already gone drops the event.
class StrandSink final : public EventSink {
 public:
  StrandSink(std::weak_ptr<GenerationJob> job, boost::asio::any_io_executor executor, size_t choice)
      : job_(std::move(job)), executor_(std::move(executor)), choice_(choice) {}

  void on_event(TokenEvent&& event) override {
    std::shared_ptr<GenerationJob> job = job_.lock();
    if (!job) return;
    boost::asio::post(executor_,
                      [job = std::move(job), choice = choice_, event = std::move(event)]() mutable {
                        job->on_event(choice, std::move(event));
                      });
  }

 private:
  std::weak_ptr<GenerationJob> job_;
  boost::asio::any_io_executor executor_;
  size_t choice_;
};

}  // namespace

void GenerationJob::start(const GenerationContext& context, api::GenerationSpec spec,
                          std::shared_ptr<HttpExchange> exchange) {
  auto job = std::make_shared<GenerationJob>(context, std::move(spec), std::move(exchange));
  job->submit_all();
}

GenerationJob::GenerationJob(const GenerationContext& context, api::GenerationSpec spec,
                             std::shared_ptr<HttpExchange> exchange)
    : context_(context),
      spec_(std::move(spec)),
      exchange_(std::move(exchange)),
      header_(api::make_response_header(spec_.endpoint, context.model_id)) {}

GenerationJob::~GenerationJob() = default;

const char* GenerationJob::endpoint_label() const {
  return api::endpoint_name(spec_.endpoint);
}

void GenerationJob::submit_all() {
  Engine& engine = *context_.engine;
  api::check_admissible(engine, spec_);
  std::vector<RequestId> ids;
  try {
    // Events only run on this strand, so none reaches on_event before the ids are stored.
    ids = api::submit_choices(engine, spec_, [this](size_t index) {
      return std::make_shared<StrandSink>(weak_from_this(), exchange_->executor(), index);
    });
  } catch (const api::ApiError&) {
    closed_ = true;
    throw;
  }
  states_.resize(ids.size());
  outcomes_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    states_[i].id = ids[i];
  }
  remaining_ = ids.size();
  auto self = shared_from_this();
  exchange_->on_client_gone([self] { self->client_gone(); });
  if (spec_.stream) {
    exchange_->start_stream(std::string(kSseContentType));
    if (spec_.endpoint == api::Endpoint::kChat) {
      // OpenAI opens each choice with the assistant role and empty content.
      for (size_t i = 0; i < outcomes_.size(); ++i) {
        exchange_->stream(sse_event(api::dump_json(api::stream_chunk(
            header_, static_cast<int>(i), "", nullptr, nullptr, true, spec_.include_usage))));
      }
    }
  }
}

void GenerationJob::client_gone() {
  if (closed_) return;
  closed_ = true;
  for (size_t i = 0; i < outcomes_.size(); ++i) {
    if (!outcomes_[i].done) context_.engine->abort(states_[i].id);
  }
  context_.metrics->observe_status(endpoint_label(), 499);
}

void GenerationJob::on_event(size_t index, TokenEvent&& event) {
  if (closed_) return;
  ChoiceState& state = states_[index];
  if (event.token >= 0) {
    if (event.index > 0) {
      context_.metrics->observe_inter_token(seconds_between(state.last_token, event.time));
    }
    state.last_token = event.time;
  }
  // add() takes only the event's logprob alternatives, error and stop string; the rest is
  // read below.
  outcomes_[index].add(std::move(event), spec_.logprobs);
  if (event.finished) {
    const RequestMetrics& m = event.metrics;
    SequenceObservation o;
    o.prompt_tokens = event.prompt_tokens;
    o.cached_prompt_tokens = event.cached_prompt_tokens;
    o.kv_transfer = event.kv_transfer;
    o.e2e = m.e2e_seconds;
    if (event.completion_tokens > 0) o.ttft = m.ttft_seconds;
    if (event.completion_tokens > 1) o.tpot = m.tpot_seconds;
    context_.metrics->observe_sequence(o);
    note_finished_choice(event, o);
    --remaining_;
  }
  if (spec_.stream && (!event.text.empty() || event.finished)) {
    stream_event(index, event.text, event.finished);
  }
  if (remaining_ == 0) finish();
}

void GenerationJob::note_finished_choice(const TokenEvent& event, const SequenceObservation& o) {
  RequestRecord* r = context_.record.get();
  if (r == nullptr) return;
  // Token counts add up over the choices; timings and the finish reason are the first
  // choice's, as a one-choice request (the common case) has them.
  const bool first = r->completion_tokens < 0;
  if (event.kv_transfer.remote) {
    r->kv_bytes = std::max<int64_t>(r->kv_bytes, 0) + static_cast<int64_t>(event.kv_transfer.bytes);
    r->kv_transfer = std::max(r->kv_transfer, event.kv_transfer.transfer_seconds);
    r->kv_wait = std::max(r->kv_wait, event.kv_transfer.wait_seconds);
  }
  r->prompt_tokens = std::max<int64_t>(r->prompt_tokens, 0) + (first ? event.prompt_tokens : 0);
  r->completion_tokens = std::max<int64_t>(r->completion_tokens, 0) + event.completion_tokens;
  if (first) {
    r->ttft = o.ttft;
    r->tpot = o.tpot;
    r->finish_reason = finish_reason_name(event.finish_reason);
  }
}

void GenerationJob::stream_event(size_t index, const std::string& text, bool final) {
  api::ChoiceOutcome& c = outcomes_[index];
  if (final && c.reason == FinishReason::kError) {
    exchange_->stream(sse_event(api::generation_failed(c.error, c.error_code).to_json()));
    return;
  }
  const char* reason = final ? finish_reason_name(c.reason) : nullptr;
  // The engine held back text that may be a call (Request::tool_calls); the final event's
  // text is the content after it, then the calls.
  std::string shown = text;
  if (final && !c.tool_calls.empty()) {
    if (!shown.empty()) {
      exchange_->stream(sse_event(api::dump_json(api::stream_chunk(
          header_, static_cast<int>(index), shown, nullptr, nullptr, false, spec_.include_usage))));
      shown.clear();
    }
    exchange_->stream(sse_event(api::dump_json(
        api::tool_calls_chunk(header_, static_cast<int>(index), api::tool_calls_json(c.tool_calls),
                              spec_.include_usage))));
    if (c.reason == FinishReason::kStop) reason = "tool_calls";
  } else if (!final && shown.empty() && !spec_.logprobs) {
    return;  // nothing to show yet (held back, or a token still incomplete)
  }
  nlohmann::json logprobs;
  if (spec_.logprobs) {
    logprobs = api::logprobs_json(spec_.endpoint, context_.engine->tokenizer(), c.logprobs);
    c.logprobs.clear();  // sent: the next chunk carries only its own tokens
  }
  exchange_->stream(sse_event(
      api::dump_json(api::stream_chunk(header_, static_cast<int>(index), shown, logprobs, reason,
                                       false, spec_.include_usage, c.stop_string))));
}

void GenerationJob::finish() {
  closed_ = true;
  if (spec_.stream) {
    if (spec_.include_usage) {
      api::Usage u = api::usage_of(outcomes_, spec_.n);
      u.compression = spec_.compression_usage;
      exchange_->stream(sse_event(api::dump_json(api::usage_chunk(header_, u))));
    }
    exchange_->stream(std::string(kSseDone));
    exchange_->end_stream();
    context_.metrics->observe_status(endpoint_label(), 200);
    return;
  }
  if (const api::ChoiceOutcome* failed = api::first_failure(outcomes_)) {
    const api::ApiError error = api::generation_failed(failed->error, failed->error_code);
    exchange_->respond(error.status(), "application/json", error.to_json(),
                       error.retry_after()
                           ? HeaderList{{"Retry-After", std::to_string(*error.retry_after())}}
                           : HeaderList{});
    context_.metrics->observe_status(endpoint_label(), error.status());
    return;
  }
  const nlohmann::json body =
      api::response_body(spec_, header_, outcomes_, context_.engine->tokenizer());
  exchange_->respond(200, "application/json", api::dump_json(body));
  context_.metrics->observe_status(endpoint_label(), 200);
}

}  // namespace rapide::serve
