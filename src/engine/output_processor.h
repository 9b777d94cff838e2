// OutputProcessor: from a step's logits to what its requests' clients see.
//
// It owns each request's output state — sampler (its RNG), detokenizer, stop strings, event
// sink — and nothing of its scheduling (that is the Scheduler's). A step goes through it
// twice:
//   process(): samples every row with logits (in parallel: a sampler reads only its own
//     sequence) and decides, in row order, which requests end: end-of-generation and stop
//     tokens, max_tokens, stop strings. The result is plain data for Scheduler::update.
//   emit(): after the scheduler applied the result (a finished request's blocks are already
//     free), sends the step's token events, and each ended request's final event with its
//     usage, timings and metrics.
// A request that ends outside a step (abort, failure, shutdown) gets its final event from
// emit_final(). Engine thread only.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/step.h"
#include "engine/tool_call_parser.h"
#include "grammar/constraint.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

// What a request needs on the output side.
struct RequestOutputState {
  std::shared_ptr<EventSink> sink;
  std::unique_ptr<Sampler> sampler;
  std::optional<StreamingDetokenizer> detokenizer;  // absent: token ids only
  std::optional<StopChecker> stop_checker;
  std::optional<grammar::GrammarState> grammar;  // a structured-output request's position
  std::optional<ToolCallStream> tool_calls;      // Request::tool_calls: the hold-back
  size_t text_bytes = 0;                         // text its events carried so far
};

class OutputProcessor {
 public:
  // The tokenizer and pool must outlive the processor.
  OutputProcessor(const Tokenizer& tokenizer, int vocab_size, ThreadPool& pool);

  void add(RequestId id, RequestOutputState state);

  // Samples the plan's logits rows (see engine/step.h for their order) and decides which
  // requests end. `scheduler` gives each sequence's tokens (penalties read them) and limits.
  StepResult process(const StepPlan& plan, std::span<const float> logits,
                     const Scheduler& scheduler);
  // Sends the events of `result` (the last process() call's); `finished` is what
  // Scheduler::update returned for it.
  void emit(const StepResult& result, const std::vector<FinishedRequest>& finished);
  // The final event of a request that ended outside a step.
  void emit_final(const FinishedRequest& finished);

 private:
  struct Row {
    RequestId id;
    RequestOutputState* state;
    const Sequence* sequence;
    const ScheduledSequence* planned;
    const float* logits;  // its first logits row
  };
  // Samples (or verifies the guesses of) one row's sequence into `out` and its events.
  void process_row(const Row& row, std::vector<float>& scratch, SequenceOutput& out,
                   std::vector<TokenEvent>& events);
  // A token's event, and whether it ends its request.
  TokenEvent token_event(RequestId id, RequestOutputState& state, const Sequence& s,
                         const SampleResult& r, int32_t generated,
                         std::optional<FinishReason>& reason);
  void send_final(RequestOutputState& state, TokenEvent& event, const FinishedRequest& f);

  const Tokenizer& tokenizer_;
  size_t vocab_;
  ThreadPool& pool_;
  std::unordered_map<RequestId, RequestOutputState> states_;
  std::vector<Row> rows_;                           // this step's sequences to sample
  std::vector<std::vector<float>> logits_scratch_;  // one logits row per pool thread
  // Events of the last process(), per output, waiting for emit().
  std::vector<std::vector<TokenEvent>> pending_;
};

}  // namespace rapide
