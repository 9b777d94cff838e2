// One llama-server /completion (or /infill) request in flight: its prompts submitted to the
// engine through the same path as /v1/completions (api/engine_requests.h), their events
// gathered on the connection's strand, and the answer written in llama-server's shapes
// (llama_server_api.h): one JSON object (an array for several prompts), or a Server-Sent
// Events stream of {"content", "tokens", "stop": false} events ending, per prompt, with the
// full object and "stop": true. llama-server's native stream has no "data: [DONE]".
//
// A client that disconnects aborts every unfinished prompt so their KV blocks are freed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/choice_outcome.h"
#include "engine/engine.h"
#include "serve/http_exchange.h"
#include "serve/llama_server_api.h"
#include "serve/metrics.h"
#include "serve/request_log.h"

namespace rapide::serve {

struct NativeJobContext {
  Engine* engine = nullptr;
  ServeMetrics* metrics = nullptr;
  std::string model_id;
  std::string label;                      // the metrics' endpoint: "completion" or "infill"
  std::shared_ptr<RequestRecord> record;  // the request log's line; may be null
};

class NativeCompletionJob : public std::enable_shared_from_this<NativeCompletionJob> {
 public:
  // Submits every prompt and answers on `exchange` when they finish. Must run on the
  // exchange's strand. Throws ApiError before anything is written when the engine refuses.
  static void start(const NativeJobContext& context, llama::NativeCompletion request,
                    std::shared_ptr<HttpExchange> exchange);

  NativeCompletionJob(const NativeJobContext& context, llama::NativeCompletion request,
                      std::shared_ptr<HttpExchange> exchange);
  // On the strand, in engine order per prompt.
  void on_event(size_t index, TokenEvent&& event);

 private:
  struct PromptState {
    RequestId id = 0;
    llama::FinishedPrompt done;
    size_t probs_sent = 0;  // completion_probabilities entries already streamed
  };

  void submit_all();
  void client_gone();
  nlohmann::json answer(size_t index, bool streamed) const;
  void finish();

  NativeJobContext context_;
  llama::NativeCompletion request_;
  std::shared_ptr<HttpExchange> exchange_;
  std::vector<PromptState> states_;
  std::vector<api::ChoiceOutcome> outcomes_;
  size_t remaining_ = 0;
  bool closed_ = false;
};

}  // namespace rapide::serve
