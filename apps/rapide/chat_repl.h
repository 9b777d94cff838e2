// The `rapide chat` conversation loop, independent of where replies come from (the
// in-process engine or a server's /v1/chat/completions):
//
//  * GNU readline for line editing and history (kept in ~/.rapide_history when HOME is set);
//  * multi-line input: a line ending in '\' continues on the next, and a line of """ opens
//    a block that the next """ line closes;
//  * commands: /system TEXT, /reset, /save FILE, /params [NAME VALUE], /help, /quit
//    (Ctrl-D quits too);
//  * after each reply, one line of figures: prompt tokens, TTFT, TPOT, tokens and why it
//    stopped.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "sampling/sampling_params.h"

namespace rapide::cli {

// What one reply cost, for the figures line.
struct ChatReplyStats {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double ttft_seconds = 0.0;
  double tpot_seconds = 0.0;
  std::string finish_reason;
};

class ChatBackend {
 public:
  virtual ~ChatBackend() = default;
  // Generates the assistant's next message for `messages` (OpenAI shape), calling `on_text`
  // with each piece as it arrives; returns the whole reply in `reply`. Throws on failure.
  virtual ChatReplyStats reply(const nlohmann::json& messages, const SamplingParams& sampling,
                               const std::function<void(const std::string&)>& on_text,
                               std::string& reply) = 0;
};

// Runs the loop on the terminal until /quit or end of input. `system` starts the
// conversation with that system message when not empty.
void run_chat_repl(ChatBackend& backend, SamplingParams sampling, const std::string& system);

}  // namespace rapide::cli
