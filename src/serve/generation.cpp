#include "serve/generation.h"

#include <boost/asio/post.hpp>

#include "base/error.h"
#include "base/logging.h"
#include "serve/api_error.h"
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

void GenerationJob::start(const GenerationContext& context, GenerationSpec spec,
                          std::shared_ptr<HttpExchange> exchange) {
  auto job = std::make_shared<GenerationJob>(context, std::move(spec), std::move(exchange));
  job->submit_all();
}

GenerationJob::GenerationJob(const GenerationContext& context, GenerationSpec spec,
                             std::shared_ptr<HttpExchange> exchange)
    : context_(context),
      spec_(std::move(spec)),
      exchange_(std::move(exchange)),
      header_(make_response_header(spec_.endpoint, context.model_id)) {}

GenerationJob::~GenerationJob() = default;

const char* GenerationJob::endpoint_label() const {
  return spec_.endpoint == Endpoint::kChat ? "chat.completions" : "completions";
}

void GenerationJob::submit_all() {
  Engine& engine = *context_.engine;
  const char* prompt_param = spec_.endpoint == Endpoint::kChat ? "messages" : "prompt";
  // Every prompt is checked before any choice is queued, so a refusal queues nothing.
  for (const auto& prompt : spec_.prompts) {
    try {
      engine.check_admissible(prompt, spec_.sampling);
    } catch (const Error& e) {
      throw api_error_from(e, prompt_param);
    }
  }
  choices_.resize(spec_.prompts.size() * static_cast<size_t>(spec_.n));
  size_t submitted = 0;
  try {
    for (size_t p = 0; p < spec_.prompts.size(); ++p) {
      for (int i = 0; i < spec_.n; ++i) {
        const size_t index = p * static_cast<size_t>(spec_.n) + static_cast<size_t>(i);
        Request request;
        request.prompt = spec_.prompts[p];
        request.sampling = spec_.sampling;
        // Choice 0 keeps the request's seed (so n=1 and n>1 agree on it); the others differ.
        request.sampling.seed += static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
        request.sink = std::make_shared<StrandSink>(weak_from_this(), exchange_->executor(), index);
        choices_[index].id = engine.submit(std::move(request));
        ++submitted;
      }
    }
  } catch (const Error& e) {
    for (size_t i = 0; i < submitted; ++i) engine.abort(choices_[i].id);
    closed_ = true;
    throw api_error_from(e, prompt_param);
  }
  remaining_ = choices_.size();
  auto self = shared_from_this();
  exchange_->on_client_gone([self] { self->client_gone(); });
  if (spec_.stream) {
    exchange_->start_stream(std::string(kSseContentType));
    if (spec_.endpoint == Endpoint::kChat) {
      // OpenAI opens each choice with the assistant role and empty content.
      for (size_t i = 0; i < choices_.size(); ++i) {
        exchange_->stream(sse_event(dump_json(stream_chunk(
            header_, static_cast<int>(i), "", nullptr, nullptr, true, spec_.include_usage))));
      }
    }
  }
}

void GenerationJob::client_gone() {
  if (closed_) return;
  closed_ = true;
  for (const Choice& c : choices_) {
    if (!c.done) context_.engine->abort(c.id);
  }
  context_.metrics->observe_status(endpoint_label(), 499);
}

void GenerationJob::record_logprob(Choice& c, const TokenEvent& event) {
  LogprobEntry entry;
  entry.token = event.token;
  entry.logprob = event.logprob;
  entry.top.assign(event.top_logprobs.begin(), event.top_logprobs.end());
  c.logprobs.push_back(std::move(entry));
}

void GenerationJob::on_event(size_t index, TokenEvent&& event) {
  if (closed_) return;
  Choice& c = choices_[index];
  if (event.token >= 0) {
    if (event.index > 0) {
      context_.metrics->observe_inter_token(seconds_between(c.last_token, event.time));
    }
    c.last_token = event.time;
    // A token that ended the choice without text (end-of-generation, a stop token or the
    // end of a stop string) is not part of the completion, so it has no logprob entry.
    const bool silent_stop =
        event.finished && event.finish_reason == FinishReason::kStop && event.text.empty();
    if (spec_.logprobs && !silent_stop) record_logprob(c, event);
  }
  c.text += event.text;
  if (event.finished) {
    c.done = true;
    c.reason = event.finish_reason;
    c.error = event.error;
    c.prompt_tokens = event.prompt_tokens;
    c.completion_tokens = event.completion_tokens;
    c.cached_prompt_tokens = event.cached_prompt_tokens;
    const RequestMetrics& m = event.metrics;
    SequenceObservation o;
    o.prompt_tokens = event.prompt_tokens;
    o.cached_prompt_tokens = event.cached_prompt_tokens;
    o.e2e = m.e2e_seconds;
    if (event.completion_tokens > 0) o.ttft = m.ttft_seconds;
    if (event.completion_tokens > 1) o.tpot = m.tpot_seconds;
    context_.metrics->observe_sequence(o);
    --remaining_;
  }
  if (spec_.stream && (!event.text.empty() || event.finished)) {
    stream_event(index, c, event.text, event.finished);
  }
  if (remaining_ == 0) finish();
}

void GenerationJob::stream_event(size_t index, Choice& c, const std::string& text, bool final) {
  if (final && c.reason == FinishReason::kError) {
    const ApiError error(500, "generation failed: " + c.error, {}, "engine_error");
    exchange_->stream(sse_event(error.to_json()));
    return;
  }
  nlohmann::json logprobs;
  if (spec_.logprobs) {
    logprobs = spec_.endpoint == Endpoint::kChat
                   ? chat_logprobs_json(context_.engine->tokenizer(), c.logprobs)
                   : completion_logprobs_json(context_.engine->tokenizer(), c.logprobs,
                                              c.streamed_text_bytes);
    c.logprobs.clear();
  }
  c.streamed_text_bytes += text.size();
  const char* reason = final ? finish_reason_name(c.reason) : nullptr;
  exchange_->stream(sse_event(dump_json(stream_chunk(
      header_, static_cast<int>(index), text, logprobs, reason, false, spec_.include_usage))));
}

Usage GenerationJob::usage() const {
  Usage u;
  const size_t n = static_cast<size_t>(spec_.n);
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    if (i % n == 0) {  // each prompt is counted once, whatever n
      u.prompt_tokens += c.prompt_tokens;
      u.cached_tokens += c.cached_prompt_tokens;
    }
    u.completion_tokens += c.completion_tokens;
  }
  return u;
}

void GenerationJob::finish() {
  closed_ = true;
  const Usage u = usage();
  const Tokenizer& tokenizer = context_.engine->tokenizer();
  if (spec_.stream) {
    if (spec_.include_usage) exchange_->stream(sse_event(dump_json(usage_chunk(header_, u))));
    exchange_->stream(std::string(kSseDone));
    exchange_->end_stream();
    context_.metrics->observe_status(endpoint_label(), 200);
    return;
  }
  std::vector<ChoiceResult> results;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    if (c.reason == FinishReason::kError) {
      const ApiError error(500, "generation failed: " + c.error, {}, "engine_error");
      exchange_->respond(500, "application/json", error.to_json());
      context_.metrics->observe_status(endpoint_label(), 500);
      return;
    }
    ChoiceResult r;
    r.index = static_cast<int>(i);
    r.text = c.text;
    r.finish_reason = finish_reason_name(c.reason);
    if (spec_.logprobs) {
      r.logprobs = spec_.endpoint == Endpoint::kChat
                       ? chat_logprobs_json(tokenizer, c.logprobs)
                       : completion_logprobs_json(tokenizer, c.logprobs, 0);
    }
    results.push_back(std::move(r));
  }
  exchange_->respond(200, "application/json", dump_json(full_response(header_, results, u)));
  context_.metrics->observe_status(endpoint_label(), 200);
}

}  // namespace rapide::serve
