// One OpenAI generation request in flight: its choices submitted to the engine, their token
// events gathered on the connection's strand, and the response written as a whole or as a
// Server-Sent Events stream.
//
// The engine thread only posts events to the strand (never touches the socket); a client
// that disconnects aborts every unfinished choice at once so their KV blocks are freed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "serve/http_exchange.h"
#include "serve/metrics.h"
#include "serve/openai_protocol.h"
#include "serve/openai_responses.h"

namespace rapide::serve {

struct GenerationContext {
  Engine* engine = nullptr;
  ServeMetrics* metrics = nullptr;
  std::string model_id;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // Submits every choice and answers on `exchange` when they finish. Must run on the
  // exchange's strand. Throws ApiError before anything is written when the engine refuses
  // a choice (then the choices already submitted are aborted).
  static void start(const GenerationContext& context, GenerationSpec spec,
                    std::shared_ptr<HttpExchange> exchange);

  GenerationJob(const GenerationContext& context, GenerationSpec spec,
                std::shared_ptr<HttpExchange> exchange);
  ~GenerationJob();
  // On the strand, in engine order per choice.
  void on_event(size_t choice, TokenEvent&& event);

 private:
  struct Choice {
    RequestId id = 0;
    bool done = false;
    bool started_stream = false;  // chat: the role delta went out
    std::string text;
    FinishReason reason = FinishReason::kLength;
    std::string error;
    std::vector<LogprobEntry> logprobs;  // all (non-streamed) or not yet sent (streamed)
    size_t streamed_text_bytes = 0;
    TimePoint last_token;
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;
    int32_t cached_prompt_tokens = 0;
  };

  void submit_all();
  void client_gone();
  void record_logprob(Choice& c, const TokenEvent& event);
  void stream_event(size_t index, Choice& c, const std::string& text, bool final);
  void finish();
  Usage usage() const;
  const char* endpoint_label() const;

  GenerationContext context_;
  GenerationSpec spec_;
  std::shared_ptr<HttpExchange> exchange_;
  ResponseHeader header_;
  std::vector<Choice> choices_;
  size_t remaining_ = 0;
  bool closed_ = false;  // response complete or client gone: ignore further events
};

}  // namespace rapide::serve
