// Incremental Server-Sent Events framing: bytes in, complete events' data out.
//
// Network reads split events anywhere (mid-line, mid-"\r\n"), so the parser keeps the partial
// line between calls. Lines end with "\n" or "\r\n"; "data:" lines of one event are joined
// with "\n"; comments (":...") and other fields (event, id, retry) are skipped.
//
// A line or an event longer than kMaxEventBytes (a broken server's endless line) is not
// buffered: the parser stops and says overflowed(), so memory stays bounded per stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace rapide::loadgen {

class SseParser {
 public:
  using Handler = std::function<void(const std::string& data)>;
  // Far above any real chunk (a token with 20 logprob alternatives is a few KB).
  static constexpr size_t kMaxEventBytes = 1 << 20;

  // Calls on_event once per event completed by these bytes, in order. Does nothing once
  // overflowed().
  void feed(std::string_view bytes, const Handler& on_event);
  bool overflowed() const { return overflowed_; }
  // Dispatches an event left open when the stream ends without its blank line.
  void finish(const Handler& on_event);
  // Bytes seen that were not part of any "data:" line (to tell JSON from SSE).
  bool saw_data() const { return saw_data_; }

 private:
  void line(std::string_view text, const Handler& on_event);
  void overflow();  // drops what is buffered; feed() and finish() do nothing from now on

  std::string partial_;
  std::string data_;
  bool has_data_ = false;
  bool saw_data_ = false;
  bool overflowed_ = false;
};

}  // namespace rapide::loadgen
