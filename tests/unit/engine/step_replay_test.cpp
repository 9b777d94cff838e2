// A step is plain data that can be written down and replayed: the engine's plans and results,
// recorded through the step observer, round-trip through JSON unchanged, and running the
// recorded plans again through a fresh ModelRunner over a fresh KV store reproduces every
// greedy token the engine produced (chunked prefill, decodes of several sequences, requests
// that end and others that start meanwhile).
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/step_json.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

constexpr const char* kModel = "models/stories260K/stories260K.gguf";

int32_t argmax(const float* row, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

TEST(StepReplay, RecordedPlansRoundTripAndReplayToTheSameTokens) {
  RAPIDE_REQUIRE_SHARED(kModel);
  LoadedForTest loaded = load_for_test(shared_path(kModel));
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "16MiB";
  o.max_context = 256;
  o.prefill_chunk = 5;     // prompts span several steps
  o.prefix_cache = false;  // a replay over an empty store has no cached blocks to attach
  std::vector<nlohmann::json> plans, results;
  std::mutex m;
  {
    Engine engine(*loaded.model, *loaded.tokenizer, o);
    engine.set_step_observer([&](const StepPlan& plan, const StepResult& result, const StepStats&) {
      std::lock_guard<std::mutex> lock(m);
      plans.push_back(step_plan_to_json(plan));
      results.push_back(step_result_to_json(result));
    });
    const char* prompts[] = {"Once upon a time", "Lily and Tom went to the park to play", "The sun",
                             "One day, a boy named Tim found a big red ball"};
    std::vector<std::shared_ptr<EventQueue>> queues;
    for (int i = 0; i < 4; ++i) {
      queues.push_back(std::make_shared<EventQueue>());
      Request r;
      r.prompt = loaded.tokenizer->encode(prompts[i], true);
      r.sampling.temperature = 0.0f;
      r.sampling.max_tokens = 12 + 9 * i;
      r.sampling.ignore_eos = true;
      r.sink = queues.back();
      engine.submit(std::move(r));
    }
    for (auto& q : queues) collect(*q);
  }
  ASSERT_GT(plans.size(), 10u);

  PagedKvStore kv(KvLayout::for_model(loaded.model->config(), o.kv_block_size, o.kv_type), 4096,
                  o.max_context);
  ThreadPool pool(2);
  ModelRunner runner(*loaded.model, kv, pool);
  const int vocab = loaded.model->config().vocab_size;
  int compared = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    // Through text, as a log or another rank would see it.
    const StepPlan plan = step_plan_from_json(nlohmann::json::parse(plans[i].dump()));
    const StepResult result = step_result_from_json(nlohmann::json::parse(results[i].dump()));
    ASSERT_EQ(step_plan_to_json(plan), plans[i]);
    ASSERT_EQ(step_result_to_json(result), results[i]);
    for (const ScheduledSequence& s : plan.sequences)
      kv.reserve(s.kv_id, s.start_position + s.fed());
    const std::span<const float> logits = runner.run(plan);
    ASSERT_EQ(logits.size(), static_cast<size_t>(plan.logits_rows()) * vocab);
    size_t row = 0, out = 0;
    for (const ScheduledSequence& s : plan.sequences) {
      row += static_cast<size_t>(s.logits_rows);
      if (s.logits_rows == 0 || s.padding) continue;
      ASSERT_LT(out, result.outputs.size());
      const SequenceOutput& o = result.outputs[out++];
      ASSERT_EQ(o.request_id, s.request_id);
      ASSERT_EQ(o.tokens.size(), 1u);
      EXPECT_EQ(argmax(logits.data() + (row - 1) * vocab, vocab), o.tokens[0].token)
          << "step " << plan.step << ", request " << s.request_id;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12 + 21 + 30 + 39);  // every generated token
}

TEST(StepJson, MalformedDocumentsAreRefusedByName) {
  StepPlan plan;
  plan.step = 3;
  ScheduledSequence s;
  s.request_id = 7;
  s.tokens = {1, 2};
  s.logits_rows = 1;
  plan.sequences.push_back(s);
  nlohmann::json j = step_plan_to_json(plan);
  EXPECT_EQ(step_plan_from_json(j).sequences[0].tokens, s.tokens);
  nlohmann::json missing = j;
  missing["sequences"][0].erase("kv_id");
  try {
    step_plan_from_json(missing);
    FAIL() << "a plan without kv_id was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("kv_id"), std::string::npos) << e.what();
  }
  nlohmann::json rows = j;
  rows["sequences"][0]["logits_rows"] = 5;  // more rows than fed positions
  EXPECT_THROW(step_plan_from_json(rows), Error);
  EXPECT_THROW(step_result_from_json(nlohmann::json::parse(R"({"step": 1, "outputs": [
      {"request_id": 1, "tokens": [], "finish": "sideways"}]})")),
               Error);
}

}  // namespace
}  // namespace rapide::testing
