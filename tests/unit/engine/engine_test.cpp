// The engine under concurrency: many requests at once must produce exactly what each
// produces alone, aborts and preemption must not lose or change anything, and the KV pool
// must be whole again afterwards.
#include <gtest/gtest.h>

#include <limits>

#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

struct Spec {
  std::string prompt;
  int max_tokens;
  float temperature;
  uint64_t seed;
};

std::vector<Spec> mixed_specs() {
  const char* prompts[] = {"Once upon a time",
                           "Lily and Tom went to the park",
                           "One day, a boy named Tim found a",
                           "The little dog was sad because",
                           "Sue had a red ball",
                           "The sun was hot and the birds"};
  std::vector<Spec> specs;
  for (int i = 0; i < 16; ++i) {
    specs.push_back({prompts[i % 6], 10 + (i * 37) % 120, i % 2 ? 0.0f : 0.9f,
                     static_cast<uint64_t>(1000 + i)});
  }
  return specs;
}

Request make_request(const Tokenizer& tok, const Spec& s, std::shared_ptr<EventSink> sink) {
  Request r;
  r.prompt = tok.encode(s.prompt, true);
  r.sampling.temperature = s.temperature;
  r.sampling.top_k = 40;
  r.sampling.seed = s.seed;
  r.sampling.max_tokens = s.max_tokens;
  r.sampling.ignore_eos = true;
  r.sink = std::move(sink);
  return r;
}

EngineOptions small_options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "64MiB";
  o.max_context = 512;
  return o;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    loaded_ = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  }
  // Each spec run alone on a fresh engine.
  std::vector<Outcome> run_alone(const std::vector<Spec>& specs, EngineOptions options) {
    std::vector<Outcome> out;
    Engine engine(*loaded_.model, *loaded_.tokenizer, options);
    for (const Spec& s : specs) {
      auto q = std::make_shared<EventQueue>();
      engine.submit(make_request(*loaded_.tokenizer, s, q));
      out.push_back(collect(*q));
    }
    return out;
  }
  std::vector<Outcome> run_together(Engine& engine, const std::vector<Spec>& specs) {
    std::vector<std::shared_ptr<EventQueue>> queues;
    for (const Spec& s : specs) {
      queues.push_back(std::make_shared<EventQueue>());
      engine.submit(make_request(*loaded_.tokenizer, s, queues.back()));
    }
    std::vector<Outcome> out;
    for (auto& q : queues) out.push_back(collect(*q));
    return out;
  }
  LoadedForTest loaded_;
};

void expect_same(const std::vector<Outcome>& a, const std::vector<Outcome>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].text, b[i].text) << "request " << i;
    EXPECT_EQ(a[i].reason, b[i].reason) << "request " << i;
  }
}

TEST_F(EngineTest, ConcurrentRequestsGiveWhatEachGivesAlone) {
  const auto specs = mixed_specs();
  const auto alone = run_alone(specs, small_options());
  Engine engine(*loaded_.model, *loaded_.tokenizer, small_options());
  expect_same(alone, run_together(engine, specs));
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(alone[i].completion_tokens, specs[i].max_tokens);
    EXPECT_EQ(alone[i].reason, FinishReason::kLength);
  }
  EngineStats st = engine.stats();
  EXPECT_EQ(st.kv.used_blocks, 0);
  EXPECT_EQ(st.requests_finished, specs.size());
}

TEST_F(EngineTest, StaticBatchingAndContiguousLayoutGiveTheSameTokens) {
  const auto specs = mixed_specs();
  EngineOptions base = small_options();
  Engine continuous(*loaded_.model, *loaded_.tokenizer, base);
  const auto reference = run_together(continuous, specs);
  EngineOptions s = base;
  s.batching = BatchingMode::kStatic;
  s.max_seqs = 5;
  Engine static_engine(*loaded_.model, *loaded_.tokenizer, s);
  expect_same(reference, run_together(static_engine, specs));
  EngineOptions c = base;
  c.kv_layout = KvLayoutMode::kContiguous;
  Engine contiguous(*loaded_.model, *loaded_.tokenizer, c);
  expect_same(reference, run_together(contiguous, specs));
}

// Static batching is the request-level baseline: a batch runs as a dense batch would, each
// finished request's slot still computing, and the next batch starts only after it.
TEST_F(EngineTest, StaticBatchingKeepsFinishedSlotsComputingUntilTheBatchEnds) {
  std::vector<Spec> specs = {{"Once upon a time", 3, 0.0f, 1},
                             {"Sue had a red ball", 30, 0.0f, 2},
                             {"The sun was hot", 3, 0.0f, 3},
                             {"Lily and Tom", 3, 0.0f, 4},
                             {"One day, a boy", 5, 0.0f, 5}};
  EngineOptions o = small_options();
  o.batching = BatchingMode::kStatic;
  o.max_seqs = 4;
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  std::vector<std::shared_ptr<EventQueue>> queues;
  std::vector<Request> requests;
  for (const Spec& s : specs) {
    queues.push_back(std::make_shared<EventQueue>());
    requests.push_back(make_request(*loaded_.tokenizer, s, queues.back()));
  }
  engine.submit_all(std::move(requests));
  std::vector<Outcome> out;
  for (auto& q : queues) out.push_back(collect(*q));
  for (size_t i = 0; i < specs.size(); ++i)
    EXPECT_EQ(out[i].completion_tokens, specs[i].max_tokens);
  EXPECT_GE(out[4].finished, out[1].finished) << "the second batch started before the first ended";
  ASSERT_TRUE(engine.drain(std::chrono::seconds(30)));
  const EngineStats st = engine.stats();
  // First batch: one prefill step, then 29 decode steps of 4 rows each (3 of them padding
  // after the third step); then the second batch: a prefill and 4 single-row decodes.
  int four_row_steps = 0;
  for (const StepStats& step : st.recent_steps) four_row_steps += step.decode_tokens == 4;
  EXPECT_EQ(four_row_steps, 29);
  EXPECT_EQ(st.requests_finished, specs.size());
  EXPECT_EQ(st.generated_tokens, 3u + 30 + 3 + 3 + 5) << "padding tokens are not output";
  EXPECT_EQ(st.kv.used_blocks, 0);
}

TEST_F(EngineTest, ChunkedPrefillAndSmallBudgetsGiveTheSameTokens) {
  const auto specs = mixed_specs();
  Engine reference_engine(*loaded_.model, *loaded_.tokenizer, small_options());
  const auto reference = run_together(reference_engine, specs);
  EngineOptions o = small_options();
  o.prefill_chunk = 3;
  o.max_batch_tokens = 7;
  o.max_seqs = 3;
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  expect_same(reference, run_together(engine, specs));
}

TEST_F(EngineTest, PreemptionUnderATinyKvBudgetCompletesEveryRequestUnchanged) {
  const auto specs = mixed_specs();
  Engine reference_engine(*loaded_.model, *loaded_.tokenizer, small_options());
  const auto reference = run_together(reference_engine, specs);
  EngineOptions o = small_options();
  // stories260K: 5 layers x 4 kv heads x 8 dims x 2 (K,V) x 2 bytes = 640 B per position,
  // 10 KiB per 16-token block. 160 KiB = 16 blocks = 256 positions: far less than 16
  // requests need together, enough for the longest alone.
  o.kv_memory = "160KiB";
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  expect_same(reference, run_together(engine, specs));
  EngineStats st = engine.stats();
  EXPECT_GT(st.preemptions, 0u) << "the budget was meant to force preemption";
  EXPECT_EQ(st.kv.used_blocks, 0);
}

// A model that attends through a window on every layer: the engine frees the blocks that
// left it, so requests four times longer than the whole KV budget run, concurrently and with
// preemption, and still give exactly the tokens of a run that keeps every position.
TEST_F(EngineTest, SlidingWindowRunsRequestsLongerThanTheKvBudget) {
  auto file = std::make_shared<ModelFile>(*loaded_.file);
  file->config.sliding_window = 32;
  file->config.window_layers = WindowLayers::kAll;
  Model windowed(file);
  EngineOptions o = small_options();
  o.kv_memory = "100KiB";  // 10 blocks of 16 = 160 positions
  o.prefill_chunk = 16;
  std::vector<Spec> specs;
  for (int i = 0; i < 4; ++i) specs.push_back({mixed_specs()[i].prompt, 400, 0.0f, 1});
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> expected;
  for (const Spec& s : specs) {
    expected.push_back(
        greedy(windowed, loaded_.tokenizer->encode(s.prompt, true), 400, pool).tokens);
  }
  // Speculation rolls rejected guesses back: never into the freed blocks.
  for (SpecMode spec : {SpecMode::kOff, SpecMode::kNgram}) {
    SCOPED_TRACE(spec_mode_name(spec));
    o.spec.mode = spec;
    o.spec.tokens = 4;
    Engine engine(windowed, *loaded_.tokenizer, o);
    const auto outcomes = run_together(engine, specs);
    for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(outcomes[i].tokens, expected[i]) << i;
    EXPECT_EQ(engine.stats().kv.used_blocks, 0);
    if (spec == SpecMode::kNgram) {
      EXPECT_GT(engine.stats().spec.accepted, 0u);
    }
  }

  // The same budget without the window cannot take the request at all.
  Engine unwindowed(*loaded_.model, *loaded_.tokenizer, o);
  auto q = std::make_shared<EventQueue>();
  EXPECT_THROW(unwindowed.submit(make_request(*loaded_.tokenizer, specs[0], q)), Error);
}

TEST_F(EngineTest, AbortFreesBlocksAtOnce) {
  EngineOptions o = small_options();
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  auto q = std::make_shared<EventQueue>();
  Spec long_spec{"Once upon a time", 400, 0.0f, 1};
  const RequestId id = engine.submit(make_request(*loaded_.tokenizer, long_spec, q));
  TokenEvent e;
  ASSERT_TRUE(q->pop(e, std::chrono::seconds(30)));  // it is running
  EXPECT_GT(engine.stats().kv.used_blocks, 0);
  engine.abort(id);
  Outcome o2 = collect(*q);
  EXPECT_EQ(o2.reason, FinishReason::kAbort);
  EXPECT_LT(o2.completion_tokens, 400);
  // The final event is sent after the blocks were released; stats follow the step.
  for (int i = 0; i < 100 && engine.stats().kv.used_blocks != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine.stats().kv.used_blocks, 0);
  EXPECT_EQ(engine.stats().requests_aborted, 1u);
}

TEST_F(EngineTest, RejectsWhatCanNeverRunWithClearErrors) {
  EngineOptions o = small_options();
  o.kv_memory = "160KiB";  // 256 positions
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  auto q = std::make_shared<EventQueue>();
  Spec too_long{"Once upon a time", 400, 0.0f, 1};
  try {
    engine.submit(make_request(*loaded_.tokenizer, too_long, q));
    FAIL() << "a request larger than the KV budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kExceedsCapacity);
    EXPECT_NE(std::string(e.what()).find("KV"), std::string::npos) << e.what();
  }
  Request empty;
  empty.sink = q;
  EXPECT_THROW(engine.submit(empty), Error);
  Request bad_token = make_request(*loaded_.tokenizer, {"Hi", 5, 0.0f, 1}, q);
  bad_token.prompt.push_back(100000);
  try {
    engine.submit(bad_token);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  Request over_context = make_request(*loaded_.tokenizer, {"Hi", 5, 0.0f, 1}, q);
  over_context.prompt.assign(600, 5);
  try {
    engine.submit(over_context);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
  }
  Request bad_sampling = make_request(*loaded_.tokenizer, {"Hi", 5, 0.0f, 1}, q);
  bad_sampling.sampling.top_p = 2.0f;
  try {
    engine.submit(bad_sampling);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
}

// A request whose logit_bias bans every token cannot sample: it ends with an error event,
// and the engine keeps serving the request next to it (the failure used to escape the
// engine thread).
TEST_F(EngineTest, ASamplerThatCannotSampleFailsOnlyItsRequest) {
  Engine engine(*loaded_.model, *loaded_.tokenizer, small_options());
  auto banned_queue = std::make_shared<EventQueue>();
  Request banned = make_request(*loaded_.tokenizer, {"Once upon a time", 8, 0.0f, 1}, banned_queue);
  for (int32_t id = 0; id < loaded_.tokenizer->vocab_size(); ++id) {
    banned.sampling.logit_bias.push_back({id, -std::numeric_limits<float>::infinity()});
  }
  auto ok_queue = std::make_shared<EventQueue>();
  engine.submit(std::move(banned));
  engine.submit(make_request(*loaded_.tokenizer, {"Sue had a red ball", 12, 0.0f, 1}, ok_queue));
  TokenEvent e;
  std::string error;
  bool finished = false;
  while (!finished && banned_queue->pop(e, std::chrono::seconds(60))) {
    EXPECT_LT(e.token, 0) << "a banned request produced a token";
    if (e.finished) {
      finished = true;
      EXPECT_EQ(e.finish_reason, FinishReason::kError);
      error = e.error;
    }
  }
  ASSERT_TRUE(finished);
  EXPECT_NE(error.find("no token left to sample"), std::string::npos) << error;
  const Outcome ok = collect(*ok_queue);
  EXPECT_EQ(ok.reason, FinishReason::kLength);
  EXPECT_EQ(ok.completion_tokens, 12);
  EXPECT_EQ(engine.stats().kv.used_blocks, 0);
}

TEST_F(EngineTest, StopStringsEndTheTextBeforeTheMatch) {
  Engine engine(*loaded_.model, *loaded_.tokenizer, small_options());
  Spec s{"Once upon a time", 200, 0.0f, 1};
  auto q = std::make_shared<EventQueue>();
  engine.submit(make_request(*loaded_.tokenizer, s, q));
  const Outcome full = collect(*q);
  // Greedy stories260K says "... named Lily. She loved ..." early on.
  const size_t at = full.text.find("Lily");
  ASSERT_NE(at, std::string::npos);
  Request r = make_request(*loaded_.tokenizer, s, q);
  r.sampling.stop = {"Lily"};
  engine.submit(std::move(r));
  const Outcome stopped = collect(*q);
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, at));
}

TEST_F(EngineTest, PriorityRunsFirstWhenOnlyOneFits) {
  EngineOptions o = small_options();
  o.max_seqs = 1;
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  // Occupy the engine, then queue a low- and a high-priority request. The two arrive
  // together (submit_all): submitted one by one, the occupying request could finish between
  // them on a fast machine and the low one would rightly start alone (a race that failed
  // about one run in 36).
  auto q0 = std::make_shared<EventQueue>(), ql = std::make_shared<EventQueue>(),
       qh = std::make_shared<EventQueue>();
  engine.submit(make_request(*loaded_.tokenizer, {"Once upon a time", 60, 0.0f, 1}, q0));
  Request low = make_request(*loaded_.tokenizer, {"Sue had", 5, 0.0f, 1}, ql);
  Request high = make_request(*loaded_.tokenizer, {"Tim had", 5, 0.0f, 1}, qh);
  high.priority = 10;
  std::vector<Request> pair;
  pair.push_back(std::move(low));  // first in arrival order
  pair.push_back(std::move(high));
  engine.submit_all(std::move(pair));
  collect(*q0);
  const Outcome lo = collect(*ql), ho = collect(*qh);
  // The high-priority one ran first even though it arrived later.
  EXPECT_LT(ho.finished, lo.finished);
}

// Every step reaches the observer as plain data that accounts for the whole run: each
// request's prompt positions are fed exactly once, the tokens in the results are the tokens
// its client received, and the per-request figures on the final event follow its timings.
TEST_F(EngineTest, StepObserverSeesEveryStepAsPlainData) {
  EngineOptions o = small_options();
  o.prefill_chunk = 3;  // several chunks per prompt
  Engine engine(*loaded_.model, *loaded_.tokenizer, o);
  std::mutex m;
  std::map<RequestId, int> fed;
  std::map<RequestId, std::vector<int32_t>> produced;
  uint64_t steps = 0, last_step = 0;
  bool in_order = true;
  engine.set_step_observer(
      [&](const StepPlan& plan, const StepResult& result, const StepStats& stats) {
        std::lock_guard<std::mutex> lock(m);
        ++steps;
        in_order = in_order && plan.step == last_step + 1 && result.step == plan.step &&
                   stats.step == plan.step && stats.forward_seconds <= stats.seconds;
        last_step = plan.step;
        for (const ScheduledSequence& s : plan.sequences) fed[s.request_id] += s.fed();
        for (const SequenceOutput& out : result.outputs) {
          for (const SampledToken& t : out.tokens) produced[out.request_id].push_back(t.token);
        }
      });
  std::vector<std::shared_ptr<EventQueue>> queues;
  std::vector<RequestId> ids;
  std::vector<int> prompt_lengths;
  const std::vector<Spec> specs = mixed_specs();
  for (size_t i = 0; i < 6; ++i) {
    queues.push_back(std::make_shared<EventQueue>());
    Request r = make_request(*loaded_.tokenizer, specs[i], queues.back());
    prompt_lengths.push_back(static_cast<int>(r.prompt.size()));
    ids.push_back(engine.submit(std::move(r)));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    Outcome out;
    TokenEvent e;
    RequestMetrics metrics;
    while (queues[i]->pop(e, std::chrono::seconds(60))) {
      if (e.token >= 0) out.tokens.push_back(e.token);
      if (e.finished) {
        metrics = e.metrics;
        EXPECT_DOUBLE_EQ(metrics.ttft_seconds,
                         seconds_between(e.timings.arrival, e.timings.first_token));
        EXPECT_GT(metrics.e2e_seconds, 0.0);
        EXPECT_GE(metrics.e2e_seconds, metrics.ttft_seconds);
        break;
      }
    }
    std::lock_guard<std::mutex> lock(m);
    EXPECT_EQ(produced[ids[i]], out.tokens) << "request " << i;
    // Prompt positions once, then one fed token per generated token but the last.
    EXPECT_EQ(fed[ids[i]], prompt_lengths[i] + static_cast<int>(out.tokens.size()) - 1)
        << "request " << i;
  }
  std::lock_guard<std::mutex> lock(m);
  EXPECT_TRUE(in_order);
  EXPECT_EQ(steps, engine.stats().steps);
}

}  // namespace
}  // namespace rapide::testing
