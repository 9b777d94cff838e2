// What a front end hands the engine, and what flows back.
//
// A Request is token ids plus sampling parameters; events come back through the request's
// EventSink, called on the engine thread. Sinks must not block (push to a queue, post to an
// io_context): the engine thread serves every request and never waits on a client.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "engine/engine_options.h"
#include "engine/tool_call_parser.h"
#include "sampling/finish_reason.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace rapide {

using RequestId = uint64_t;

// Per-request timestamps for TTFT / TPOT accounting.
struct RequestTimings {
  TimePoint arrival;          // submit() returned
  TimePoint first_scheduled;  // first prefill chunk started
  TimePoint first_token;      // first generated token sampled
  TimePoint finished;
};

// A finished request's latency figures, derived from its timings once, by the engine: the
// server's histograms, `rapide run`, `rapide batch` and the benchmarks all read these.
struct RequestMetrics {
  double queue_seconds = 0.0;    // arrival -> first scheduled
  double ttft_seconds = 0.0;     // arrival -> first generated token (0 when none)
  double prefill_seconds = 0.0;  // first scheduled -> first generated token (0 when none)
  double tpot_seconds = 0.0;     // mean time per output token after the first (0 below 2)
  double e2e_seconds = 0.0;      // arrival -> finished
};

RequestMetrics request_metrics(const RequestTimings& timings, int32_t completion_tokens);

// Prefill/decode disaggregation (engine/remote_prefill.h): what moving a request's prompt K/V
// from the prefill rank cost it. All zero for a request whose prompt was computed here.
struct KvTransferReport {
  bool remote = false;          // the prompt was sent to the prefill rank
  int32_t blocks = 0;           // KV blocks received and adopted into the prefix cache
  uint64_t bytes = 0;           // KV bytes received (the frame, header and hashes included)
  double transfer_seconds = 0;  // receiving the frame, once its first bytes were there
  double wait_seconds = 0;      // arrival -> the K/V adopted (prefill + queue + transfer)
  double prefill_seconds = 0;   // the prefill rank's compute for this prompt
  int32_t prefill_rank = 0;     // which prefill rank computed it (MPI rank; 0 = none)
};

// One event per generated token; the last one of a request has `finished` set (it may carry
// no token, e.g. an abort or a stop string that consumed the token's text).
struct TokenEvent {
  RequestId request_id = 0;
  int32_t token = -1;  // -1 when the event carries no new token
  int32_t index = -1;  // 0-based index of the token among the generated ones
  std::string text;    // text that became final with this event (UTF-8 complete)
  // Bytes of text this request's earlier events carried: where this event's text starts in
  // the output (OpenAI's completions logprobs `text_offset`).
  size_t text_offset = 0;
  float logprob = 0.0f;  // raw model logprob (when requested)
  std::vector<TokenLogprob> top_logprobs;
  TimePoint time;  // when the token was sampled
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  // With kStop on the final event: the stop string that ended the output (empty when an
  // end-of-generation or stop token, or a completed grammar, ended it).
  std::string stop_string;
  // On the final event of a request with Request::tool_calls: the calls its output made.
  std::vector<ToolCall> tool_calls;
  std::string error;  // set with FinishReason::kError
  // kUnavailable when the error is the server's state, not the request (a prefill rank that
  // did not answer in time): the front end answers 503 instead of 500.
  ErrorCode error_code = ErrorCode::kInternal;
  // Filled on the final event.
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt positions not recomputed (prefix cache)
  RequestTimings timings;
  RequestMetrics metrics;
  KvTransferReport kv_transfer;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Called on the engine thread, in order; must return quickly without blocking.
  virtual void on_event(TokenEvent&& event) = 0;
};

// A sink a consumer thread can block on (CLI, tests, batch runner).
class EventQueue final : public EventSink {
 public:
  void on_event(TokenEvent&& event) override;
  // Waits for the next event. Returns false if none arrived within `timeout`.
  bool pop(TokenEvent& event, std::chrono::milliseconds timeout = std::chrono::hours(24));

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<TokenEvent> events_;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted
  SamplingParams sampling;
  int priority = 0;  // higher runs first and is preempted last; FCFS among equals
  std::shared_ptr<EventSink> sink;
  bool stream_text = true;   // detokenize and apply stop strings (off: token ids only)
  SpecOverride speculative;  // this request's speculation settings (unset: the server's)
  // Parse the output for tool calls written in this format (engine/tool_call_parser.h): text
  // that may be a call is held back from the events, and the final event carries the calls
  // (their text in no event). Needs stream_text.
  std::optional<ToolCallFormat> tool_calls;
  // The LoRA adapter every position of this request runs with: an index of the model's
  // adapters (Model::add_lora), or -1 for the model alone.
  int32_t adapter = -1;
};

}  // namespace rapide
