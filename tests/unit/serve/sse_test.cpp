// SSE framing as clients parse it: an event ends at a blank line ("\n\n"), so a stream is
// a sequence of "data: ..." events each ending with "\n\n", the last one [DONE]. A stream
// whose [DONE] lacks its blank line leaves a client waiting for the end of that event.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/sse.h"

namespace rapide::serve {
namespace {

// The data of each complete event of `stream`, as a strict client reads it; anything after
// the last blank line is an unfinished event and is returned in `rest`.
std::vector<std::string> events(const std::string& stream, std::string& rest) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t end; (end = stream.find("\n\n", at)) != std::string::npos; at = end + 2) {
    const std::string event = stream.substr(at, end - at);
    EXPECT_TRUE(event.starts_with("data: ")) << event;
    EXPECT_EQ(event.find('\n'), std::string::npos) << "one data line per event: " << event;
    out.push_back(event.substr(6));
  }
  rest = stream.substr(at);
  return out;
}

TEST(Sse, AStreamIsWholeEventsEndingWithDone) {
  const std::string stream =
      sse_event(R"({"choices":[{"text":"a"}]})") + sse_event(R"({"choices":[]})") +
      std::string(kSseDone);
  std::string rest;
  const std::vector<std::string> data = events(stream, rest);
  EXPECT_EQ(rest, "") << "the stream ends inside an event";
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[0], R"({"choices":[{"text":"a"}]})");
  EXPECT_EQ(data[2], "[DONE]");
}

TEST(Sse, DoneIsAnEventOfItsOwn) {
  std::string rest;
  const std::vector<std::string> data = events(std::string(kSseDone), rest);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0], "[DONE]");
  EXPECT_EQ(rest, "");
}

TEST(Sse, KnownTypeAndExactFrame) {
  EXPECT_EQ(kSseContentType, "text/event-stream");
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

}  // namespace
}  // namespace rapide::serve
