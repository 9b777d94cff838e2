// Scheduling policy as clients see it, through the Engine's public API only: under KV
// pressure the youngest request gives way (the oldest keeps running and finishes first),
// static batching admits only into an idle engine, and a request clipped by the context
// ends exactly at the context limit. Outputs alone cannot show these (a preempted request
// recomputes to the same tokens), so the tests look at the order of events.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/engine.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

struct Finished {
  int completion_tokens = 0;
  FinishReason reason = FinishReason::kError;
  TimePoint finished;
};

Finished wait_finished(EventQueue& queue) {
  TokenEvent e;
  while (queue.pop(e, std::chrono::seconds(60))) {
    if (e.finished) return {e.completion_tokens, e.finish_reason, e.timings.finished};
  }
  ADD_FAILURE() << "timed out waiting for the engine";
  return {};
}

class SchedulingPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loaded_ = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  }
  Request request(const std::string& prompt, int max_tokens, std::shared_ptr<EventSink> sink) {
    Request r;
    r.prompt = loaded_.tokenizer->encode(prompt, true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sink = std::move(sink);
    return r;
  }
  static EngineOptions options() {
    EngineOptions o;
    o.threads = 2;
    o.kv_memory = "64MiB";
    o.max_context = 512;
    return o;
  }
  LoadedForTest loaded_;
};

TEST_F(SchedulingPolicyTest, UnderKvPressureTheYoungestGivesWay) {
  EngineOptions o = options();
  // 16 blocks of 16 positions (see engine_test): each request fits alone (about 205
  // positions), the two together do not, so one must be preempted, again and again.
  o.kv_memory = "160KiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  auto older = std::make_shared<EventQueue>(), younger = std::make_shared<EventQueue>();
  // Submitted together (one arrival batch, older first): one by one, a descheduled test
  // thread could let the older request finish alone (the run takes ~20 ms) before the
  // younger arrived, and nothing would be preempted.
  std::vector<Request> both;
  both.push_back(request("Once upon a time", 200, older));
  both.push_back(request("Lily and Tom went", 200, younger));
  engine.submit_all(std::move(both));
  const Finished a = wait_finished(*older), b = wait_finished(*younger);
  EXPECT_EQ(a.completion_tokens, 200);
  EXPECT_EQ(b.completion_tokens, 200);
  EXPECT_GT(engine.stats().preemptions, 0u) << "the budget was meant to force preemption";
  // Preempting the older one instead would let the younger finish first.
  EXPECT_LT(a.finished, b.finished);
}

TEST_F(SchedulingPolicyTest, StaticBatchingAdmitsOnlyIntoAnIdleEngine) {
  EngineOptions o = options();
  o.batching = BatchingMode::kStatic;
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  auto first = std::make_shared<EventQueue>(), second = std::make_shared<EventQueue>();
  engine.submit(request("Once upon a time", 400, first));
  TokenEvent e;
  ASSERT_TRUE(first->pop(e, std::chrono::seconds(60)));  // running, 399 tokens to go
  engine.submit(request("Lily and Tom went", 5, second));
  const Finished a = wait_finished(*first);
  ASSERT_TRUE(second->pop(e, std::chrono::seconds(60)));
  // The second request's first token comes from the next batch, after the first ended.
  EXPECT_GE(e.time, a.finished);
  wait_finished(*second);
}

TEST_F(SchedulingPolicyTest, ARequestClippedByTheContextEndsAtTheLimit) {
  EngineOptions o = options();
  o.max_context = 64;
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  auto q = std::make_shared<EventQueue>();
  Request r = request("Once upon a time", 1000, q);
  const int prompt_tokens = static_cast<int>(r.prompt.size());
  engine.submit(std::move(r));
  const Finished f = wait_finished(*q);
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_EQ(f.completion_tokens, 64 - prompt_tokens);
}

}  // namespace
}  // namespace rapide::testing
