// What an engine test reads back from one request: its events folded into tokens, text and
// the final event's fields. Shared by the engine test files so each reads events one way.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/request.h"

namespace rapide::testing {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::kError;
  std::string error;
  int completion_tokens = 0;
  int cached_prompt_tokens = -1;
  TimePoint finished;
  RequestMetrics metrics;
  ErrorCode error_code = ErrorCode::kInternal;
  KvTransferReport kv_transfer;
  std::vector<ToolCall> tool_calls;  // Request::tool_calls: the final event's
  int text_events = 0;               // events that carried text
};

// Waits for the request's final event (a test failure after `timeout` without one).
inline Outcome collect(EventQueue& queue,
                       std::chrono::seconds timeout = std::chrono::seconds(120)) {
  Outcome o;
  TokenEvent e;
  while (queue.pop(e, timeout)) {
    if (e.token >= 0) o.tokens.push_back(e.token);
    o.text += e.text;
    if (!e.text.empty()) ++o.text_events;
    if (e.finished) {
      o.reason = e.finish_reason;
      o.error = e.error;
      o.completion_tokens = e.completion_tokens;
      o.cached_prompt_tokens = e.cached_prompt_tokens;
      o.finished = e.timings.finished;
      o.metrics = e.metrics;
      o.error_code = e.error_code;
      o.kv_transfer = e.kv_transfer;
      o.tool_calls = e.tool_calls;
      return o;
    }
  }
  ADD_FAILURE() << "timed out waiting for the engine";
  return o;
}

}  // namespace rapide::testing
