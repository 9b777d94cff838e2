// Server-Sent Events framing as OpenAI streams it: "data: <json>\n\n" per chunk and a
// final "data: [DONE]\n\n".
#pragma once

#include <string>
#include <string_view>

namespace rapide::serve {

inline constexpr std::string_view kSseContentType = "text/event-stream";
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// Frames one event. `payload` is one line of JSON (dump_json never emits newlines).
inline std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

}  // namespace rapide::serve
