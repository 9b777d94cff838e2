#include "loadgen/engine_backend.h"

#include <boost/asio/post.hpp>

#include "base/error.h"

namespace rapide::loadgen {

namespace {

// Collects one request's events on the engine thread and hands the finished record to the
// runner's thread in a single post, so the engine thread never waits on the benchmark.
class RecordingSink final : public EventSink {
 public:
  RecordingSink(boost::asio::io_context& io, TimePoint start, RequestRecord record,
                RecordHandler done)
      : io_(io), start_(start), record_(std::move(record)), done_(std::move(done)) {}

  void on_event(TokenEvent&& event) override {
    // The engine's own timestamp of the token (when it was sampled), not when this sink ran.
    const double now = seconds_between(start_, event.time);
    if (event.token >= 0) {
      record_.token_times.push_back(now);
      record_.output_text += event.text;
    }
    if (!event.finished) return;
    record_.end_time = now;
    record_.prompt_tokens = event.prompt_tokens;
    record_.output_tokens = event.completion_tokens;
    record_.usage_reported = true;
    if (event.finish_reason == FinishReason::kError) {
      record_.error = ErrorKind::kServerError;
      record_.error_message = event.error;
    } else if (event.finish_reason == FinishReason::kAbort) {
      record_.error = ErrorKind::kServerError;
      record_.error_message = "aborted by the engine";
    } else if (record_.token_times.empty()) {
      record_.error = ErrorKind::kEmpty;
      record_.error_message = "finished without generating a token";
    }
    boost::asio::post(io_, [done = std::move(done_), record = std::move(record_)]() mutable {
      done(std::move(record));
    });
  }

 private:
  boost::asio::io_context& io_;
  TimePoint start_;
  RequestRecord record_;
  RecordHandler done_;
};

}  // namespace

EngineBackend::EngineBackend(boost::asio::io_context& io, Engine& engine, SamplingParams sampling,
                             std::string model_label)
    : io_(io),
      engine_(engine),
      sampling_(std::move(sampling)),
      model_label_(std::move(model_label)) {}

void EngineBackend::send(const BenchRequest& request, TimePoint start, RequestRecord record,
                         RecordHandler done) {
  // Tokenizing is part of the time to first token, as it is inside a server.
  Request r;
  r.sampling = sampling_;
  r.sampling.seed = sampling_.seed + next_seed_++;
  r.sampling.max_tokens = request.max_tokens;
  r.sampling.min_tokens = request.max_tokens;
  r.sampling.ignore_eos = true;
  try {
    r.prompt = engine_.tokenizer().encode(render_prompt(request.messages), true);
    r.sink = std::make_shared<RecordingSink>(io_, start, record, done);
    engine_.submit(std::move(r));
  } catch (const Error& e) {
    record.error = ErrorKind::kRejected;
    record.error_message = e.what();
    record.end_time = seconds_between(start, Clock::now());
    boost::asio::post(io_, [done = std::move(done), record = std::move(record)]() mutable {
      done(std::move(record));
    });
  }
}

std::string EngineBackend::describe() const {
  return "in-process engine (" + model_label_ + ")";
}

}  // namespace rapide::loadgen
