// One OpenAI generation request in flight: its choices submitted to the engine, their token
// events gathered on the connection's strand, and the response written as a whole or as a
// Server-Sent Events stream.
//
// The engine thread only posts events to the strand (never touches the socket); a client
// that disconnects aborts every unfinished choice at once so their KV blocks are freed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/choice_outcome.h"
#include "api/openai_protocol.h"
#include "api/openai_responses.h"
#include "engine/engine.h"
#include "serve/http_exchange.h"
#include "serve/metrics.h"
#include "serve/request_log.h"

namespace rapide::serve {

struct GenerationContext {
  Engine* engine = nullptr;
  ServeMetrics* metrics = nullptr;
  std::string model_id;
  std::shared_ptr<RequestRecord> record;  // the request log's line; may be null
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // Submits every choice and answers on `exchange` when they finish. Must run on the
  // exchange's strand. Throws ApiError before anything is written when the engine refuses
  // a choice (then the choices already submitted are aborted).
  static void start(const GenerationContext& context, api::GenerationSpec spec,
                    std::shared_ptr<HttpExchange> exchange);

  GenerationJob(const GenerationContext& context, api::GenerationSpec spec,
                std::shared_ptr<HttpExchange> exchange);
  ~GenerationJob();
  // On the strand, in engine order per choice.
  void on_event(size_t choice, TokenEvent&& event);

 private:
  // What the server keeps of a choice beside its outcome (api/choice_outcome.h).
  struct ChoiceState {
    RequestId id = 0;
    TimePoint last_token;
  };

  void submit_all();
  void client_gone();
  // Copies a finished choice's figures into the request log's record.
  void note_finished_choice(const TokenEvent& event, const SequenceObservation& o);
  void stream_event(size_t index, const std::string& text, bool final);
  void finish();
  const char* endpoint_label() const;

  GenerationContext context_;
  api::GenerationSpec spec_;
  std::shared_ptr<HttpExchange> exchange_;
  api::ResponseHeader header_;
  std::vector<ChoiceState> states_;           // by choice index
  std::vector<api::ChoiceOutcome> outcomes_;  // by choice index
  size_t remaining_ = 0;
  bool closed_ = false;  // response complete or client gone: ignore further events
};

}  // namespace rapide::serve
