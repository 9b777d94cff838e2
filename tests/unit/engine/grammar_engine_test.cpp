// Structured output cannot hold up the engine (issue 53, N1): a grammar whose masks cost too
// much per token fails its own request while the others in the same steps complete, and an
// abort stops a mask walk in progress instead of waiting for it. On the 32000-token Llama-2
// vocabulary of llama2-tiny-random (random weights: only the grammar's cost matters here).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

constexpr const char* kModel = "models/llama2-tiny-random/llama-2-tiny-random.gguf";

class GrammarEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kModel);
    loaded_ = load_for_test(shared_path(kModel));
  }

  Request request(const std::string& gbnf, int max_tokens, std::shared_ptr<EventSink> sink) {
    Request r;
    r.prompt = loaded_.tokenizer->encode("Once upon a time", true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = gbnf.empty();
    // Compiled directly: these grammars skip the admission check on purpose.
    if (!gbnf.empty()) {
      r.sampling.constraint =
          std::make_shared<const grammar::Constraint>(grammar::parse_gbnf(gbnf), gbnf);
    }
    r.sink = std::move(sink);
    return r;
  }

  static EngineOptions options(uint64_t grammar_work_per_token) {
    EngineOptions o;
    o.threads = 2;
    o.kv_memory = "64MiB";
    o.max_context = 256;
    o.grammar_work_per_token = grammar_work_per_token;
    return o;
  }

  LoadedForTest loaded_;
};

TEST_F(GrammarEngineTest, OverThePerTokenLimitFailsOnlyThatRequest) {
  // (.*){250} passes admission (the widest expansion is ~3500) but its first mask takes ~2 M
  // matcher steps; 200 k is above what the realistic schema and choice below need.
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(200'000));
  auto costly = std::make_shared<EventQueue>();
  auto plain = std::make_shared<EventQueue>();
  auto choice = std::make_shared<EventQueue>();
  auto json = std::make_shared<EventQueue>();
  std::vector<Request> batch;
  batch.push_back(request(grammar::regex_gbnf("(.*){250}"), 20, costly));
  batch.push_back(request("", 10, plain));
  batch.push_back(request(grammar::choice_gbnf({"yes", "no", "maybe later"}), 10, choice));
  batch.push_back(request(grammar::json_schema_gbnf(nlohmann::json::parse(R"({"type": "object",
      "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
      "required": ["name", "n"]})")),
                          60, json));
  engine.submit_all(std::move(batch));
  const Outcome c = collect(*costly);
  EXPECT_EQ(c.reason, FinishReason::kError);
  EXPECT_EQ(c.error_code, ErrorCode::kExceedsCapacity);
  EXPECT_NE(c.error.find("more than 200000 matcher steps (the per-token limit)"), std::string::npos)
      << c.error;
  const Outcome p = collect(*plain);
  EXPECT_EQ(p.reason, FinishReason::kLength);
  EXPECT_EQ(p.completion_tokens, 10);
  const Outcome y = collect(*choice);
  EXPECT_EQ(y.reason, FinishReason::kStop) << y.error;
  EXPECT_TRUE(y.text == "yes" || y.text == "no" || y.text == "maybe later") << y.text;
  const Outcome j = collect(*json);
  EXPECT_NE(j.reason, FinishReason::kError) << j.error;
  EXPECT_EQ(j.text.rfind("{", 0), 0u) << j.text;
  EXPECT_EQ(engine.stats().requests_failed, 1u);
}

TEST_F(GrammarEngineTest, AbortStopsAMaskWalkInProgress) {
  // No per-token limit, and a grammar admission would refuse: (.*){10000} keeps ~140000
  // stacks alive, and with the cancellation ignored the request took 28 s to end here.
  Engine engine(*loaded_.model, *loaded_.tokenizer, options(UINT64_MAX));
  auto costly = std::make_shared<EventQueue>();
  const RequestId id = engine.submit(request(grammar::regex_gbnf("(.*){10000}"), 30, costly));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the first walk
  const auto aborted_at = Clock::now();
  engine.abort(id);
  const Outcome c = collect(*costly);
  const double seconds = seconds_between(aborted_at, Clock::now());
  EXPECT_EQ(c.reason, FinishReason::kAbort) << c.error;
  // The walk polls the flag every 4096 steps (well under a millisecond); 3 s leaves room
  // for a busy 2-core machine and is a ninth of the uncancelled walk.
  EXPECT_LT(seconds, 3.0);
  // The engine goes on with the next request.
  auto plain = std::make_shared<EventQueue>();
  engine.submit(request("", 5, plain));
  EXPECT_EQ(collect(*plain).completion_tokens, 5);
}

}  // namespace
}  // namespace rapide::testing
