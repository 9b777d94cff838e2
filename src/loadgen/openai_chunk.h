// What one streamed OpenAI-style chunk ("data: {...}") says, for completions and chat alike.
//
// Servers differ in the details (llama.cpp, vLLM, TGI and rapide all stream slightly
// differently), so only what every one of them sends is relied on: choices[0].text or
// choices[0].delta.content for generated text, an optional top-level usage object, an
// optional error object, and the "[DONE]" sentinel.
#pragma once

#include <string>

namespace rapide::loadgen {

struct StreamChunk {
  enum class Kind {
    kContent,    // carries generated text (one or more tokens)
    kOther,      // valid but no text: role header, finish_reason, usage-only chunk
    kDone,       // "[DONE]"
    kError,      // {"error": ...}
    kMalformed,  // not JSON, or JSON that is not an object
  };
  Kind kind = Kind::kOther;
  std::string text;
  bool has_usage = false;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  std::string error;  // kError / kMalformed: what was wrong
};

StreamChunk parse_stream_chunk(const std::string& data);

}  // namespace rapide::loadgen
