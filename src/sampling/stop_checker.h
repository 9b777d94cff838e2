// StopChecker: finds stop strings in streamed text without ever emitting part of one.
//
// Text arrives in pieces (one per token). A piece's tail may be the beginning of a stop
// string that the next pieces complete, so that tail is held back until it either completes
// a stop string (then it is dropped, as OpenAI does: the stop string is not returned) or can
// no longer be one (then it is emitted). Streaming never reports a different result than
// searching the whole text at once: the earliest stop string occurrence wins.
//
// Emitted text also never ends inside a UTF-8 character, so a piece carrying only the first
// bytes of a character does not produce invalid text on the wire.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rapide {

struct StopOutput {
  std::string text;      // text that is safe to emit now (may be empty)
  bool stopped = false;  // a stop string completed: text is the rest before it; nothing follows
  int stop_index = -1;   // which stop string matched (the first listed among equal positions)
};

class StopChecker {
 public:
  // stop_strings must be non-empty strings (SamplingParams::validate checks `stop`).
  explicit StopChecker(std::vector<std::string> stop_strings);

  // Consumes the next piece of generated text. After a stop, returns empty outputs.
  StopOutput push(std::string_view piece);

  // The held-back text, for when generation ends without a stop string (EOS, length).
  std::string flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched (empty until one did): vLLM's `stop_reason`, Anthropic's
  // `stop_sequence`, llama-server's `stopping_word`.
  const std::string& matched() const { return matched_; }
  // Bytes currently held back.
  size_t held_bytes() const { return pending_.size(); }

 private:
  // The length of the longest suffix of pending_ that is a proper prefix of a stop string.
  size_t partial_match_length() const;

  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace rapide
