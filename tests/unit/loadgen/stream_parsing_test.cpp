// SSE framing under arbitrary network splits, and what each OpenAI-style chunk means.
#include <gtest/gtest.h>

#include "loadgen/openai_chunk.h"
#include "loadgen/sse_parser.h"

namespace rapide::loadgen {
namespace {

std::vector<std::string> feed_in_pieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  const auto on_event = [&events](const std::string& data) { events.push_back(data); };
  for (size_t i = 0; i < stream.size(); i += piece) parser.feed(stream.substr(i, piece), on_event);
  parser.finish(on_event);
  return events;
}

TEST(BenchSse, SameEventsWhateverTheSplit) {
  const std::string stream =
      ": keep-alive comment\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "event: message\nid: 7\ndata: {\"b\":2}\n\n"
      "data: line one\ndata: line two\n\n"
      "data:no-space\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "line one\nline two",
                                             "no-space", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EXPECT_EQ(feed_in_pieces(stream, piece), expected) << "pieces of " << piece;
  }
}

TEST(BenchSse, EventWithoutTrailingBlankLineIsDeliveredAtFinish) {
  EXPECT_EQ(feed_in_pieces("data: x\n\ndata: last", 3), (std::vector<std::string>{"x", "last"}));
  SseParser json_body;
  json_body.feed("{\"choices\":[]}", [](const std::string&) {});
  json_body.finish([](const std::string&) {});
  EXPECT_FALSE(json_body.saw_data());
}

TEST(BenchSse, EndlessLineOrEventOverflowsInsteadOfGrowing) {
  std::vector<std::string> events;
  auto on_event = [&](const std::string& d) { events.push_back(d); };
  SseParser line;
  line.feed("data: x\n\ndata: ", on_event);
  const std::string piece(64 * 1024, 'a');
  for (size_t sent = 0; sent <= SseParser::kMaxEventBytes; sent += piece.size()) {
    line.feed(piece, on_event);
  }
  EXPECT_TRUE(line.overflowed());
  line.feed("\n\ndata: y\n\n", on_event);
  line.finish(on_event);
  EXPECT_EQ(events, std::vector<std::string>{"x"});  // nothing after the overflow

  // Many short data lines of one event that never ends.
  SseParser event;
  const std::string data_line = "data: " + std::string(1000, 'b') + "\n";
  for (size_t i = 0; i <= SseParser::kMaxEventBytes / 1000; ++i) event.feed(data_line, on_event);
  EXPECT_TRUE(event.overflowed());
}

TEST(BenchChunk, CompletionsAndChatText) {
  StreamChunk c = parse_stream_chunk(R"({"choices":[{"index":0,"text":"Hello"}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kContent);
  EXPECT_EQ(c.text, "Hello");
  c = parse_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":" world"}}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kContent);
  EXPECT_EQ(c.text, " world");
  // The role header and a finish chunk carry no text: not tokens.
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})").kind,
            StreamChunk::Kind::kOther);
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"delta":{},"finish_reason":"length"}]})").kind,
            StreamChunk::Kind::kOther);
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"text":null}]})").kind, StreamChunk::Kind::kOther);
}

TEST(BenchChunk, UsageDoneErrorMalformed) {
  StreamChunk c = parse_stream_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kOther);
  EXPECT_TRUE(c.has_usage);
  EXPECT_EQ(c.prompt_tokens, 12);
  EXPECT_EQ(c.completion_tokens, 34);
  // vLLM puts usage: null on every chunk unless asked.
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"text":"a"}],"usage":null})").has_usage);
  EXPECT_EQ(parse_stream_chunk("[DONE]").kind, StreamChunk::Kind::kDone);
  c = parse_stream_chunk(R"({"error":{"message":"context overflow","type":"x"}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "context overflow");
  EXPECT_EQ(parse_stream_chunk("{\"choices\": [").kind, StreamChunk::Kind::kMalformed);
  EXPECT_EQ(parse_stream_chunk("42").kind, StreamChunk::Kind::kMalformed);
}

}  // namespace
}  // namespace rapide::loadgen
