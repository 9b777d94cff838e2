// Tool calls parsed by the engine (Request::tool_calls, engine/tool_call_parser.h): whatever
// front end serves a request, its events hold back the text of a call and its final event
// carries the calls. The output is forced with a grammar on stories260K (byte-fallback
// vocabulary: any text can be written).
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

constexpr const char* kModel = "models/stories260K/stories260K.gguf";
const std::string kCall =
    "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";

class ToolCallEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kModel);
    loaded_ = load_for_test(shared_path(kModel));
    EngineOptions o;
    o.threads = 1;
    o.kv_memory = "8MiB";
    engine_ = std::make_unique<Engine>(*loaded_.model, *loaded_.tokenizer, o);
  }

  // The output forced to `text` (then end of generation), parsed in `format` when given.
  Outcome generate(const std::string& text, std::optional<ToolCallFormat> format) {
    const std::string gbnf = grammar::choice_gbnf({text});
    Request r;
    r.prompt = loaded_.tokenizer->encode("Once upon a time", true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 200;
    r.sampling.constraint =
        std::make_shared<const grammar::Constraint>(grammar::parse_gbnf(gbnf), gbnf);
    r.tool_calls = format;
    auto events = std::make_shared<EventQueue>();
    r.sink = events;
    engine_->submit(std::move(r));
    return collect(*events);
  }

  LoadedForTest loaded_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(ToolCallEngineTest, TheCallsTextIsHeldBackAndTheFinalEventCarriesTheCall) {
  const Outcome o = generate("Let me look. " + kCall, ToolCallFormat::kHermes);
  EXPECT_EQ(o.reason, FinishReason::kStop);
  EXPECT_EQ(o.text, "Let me look. ");  // the content before the call, and nothing of it
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].name, "weather");
  EXPECT_EQ(o.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_TRUE(o.tool_calls[0].id.starts_with("call_"));
  // The content streamed before the end: it was not all held to the final event.
  EXPECT_GE(o.text_events, 2);
}

TEST_F(ToolCallEngineTest, ProseIsContentAndStreamsAsItComes) {
  const Outcome o = generate("The weather is fine.", ToolCallFormat::kJson);
  EXPECT_EQ(o.text, "The weather is fine.");
  EXPECT_TRUE(o.tool_calls.empty());
  EXPECT_GE(o.text_events, 2);
}

TEST_F(ToolCallEngineTest, WithoutToolCallsTheTextIsTheOutput) {
  const Outcome o = generate("Let me look. " + kCall, std::nullopt);
  EXPECT_EQ(o.text, "Let me look. " + kCall);
  EXPECT_TRUE(o.tool_calls.empty());
}

// Each event's text_offset is where its text starts in the output (what completions logprobs
// report as text_offset): the bytes the request's earlier events carried, the calls' held
// text not counted.
TEST_F(ToolCallEngineTest, EveryEventSaysWhereItsTextStarts) {
  const std::string gbnf = grammar::choice_gbnf({"Caf\u00e9 au lait. " + kCall});
  Request r;
  r.prompt = loaded_.tokenizer->encode("Once upon a time", true);
  r.sampling.max_tokens = 200;
  r.sampling.constraint =
      std::make_shared<const grammar::Constraint>(grammar::parse_gbnf(gbnf), gbnf);
  r.tool_calls = ToolCallFormat::kHermes;
  auto events = std::make_shared<EventQueue>();
  r.sink = events;
  engine_->submit(std::move(r));
  std::string text;
  int tokens = 0;
  TokenEvent e;
  while (events->pop(e, std::chrono::seconds(60))) {
    EXPECT_EQ(e.text_offset, text.size()) << "event " << e.index << " '" << e.text << "'";
    text += e.text;
    tokens += e.token >= 0;
    if (e.finished) break;
  }
  EXPECT_TRUE(e.finished);
  EXPECT_EQ(text, "Caf\u00e9 au lait. ");
  EXPECT_GT(tokens, 20);
}

}  // namespace
}  // namespace rapide::testing
