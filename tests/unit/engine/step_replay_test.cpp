// A step is plain data that can be written down and replayed: the engine's plans and results,
// recorded through the step observer, round-trip through JSON unchanged, and running the
// recorded plans again through a fresh ModelRunner over a fresh KV store reproduces every
// greedy token the engine produced (chunked prefill, decodes of several sequences, requests
// that end and others that start meanwhile). With prefix caching, an offload tier and
// n-gram speculation on, the plans carry the KV ops their scheduling made (block copies,
// partial-block copies, offloads, restores): a PlanWorker over memory of its own repeats them
// and reproduces every token, accepted drafts included; without the ops it cannot.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/plan_broadcast.h"
#include "engine/plan_worker.h"
#include "engine/step_json.h"
#include "engine_outcome.h"
#include "every_kv_op.h"
#include "golden/greedy_runner.h"
#include "kv/memory_budget.h"
#include "kv/offload_tier.h"
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

struct Recording {
  std::vector<nlohmann::json> plans, results;
  EngineStats stats;
  KvLayout layout;
};

// Runs `rounds` rounds of the prompts (each round's requests together) and records every step.
Recording record(LoadedForTest& loaded, const EngineOptions& o,
                 const std::vector<std::string>& prompts, int rounds, int max_tokens) {
  Recording rec;
  std::mutex m;
  Engine engine(*loaded.model, *loaded.tokenizer, o);
  engine.set_step_observer([&](const StepPlan& plan, const StepResult& result, const StepStats&) {
    std::lock_guard<std::mutex> lock(m);
    rec.plans.push_back(step_plan_to_json(plan));
    rec.results.push_back(step_result_to_json(result));
  });
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::shared_ptr<EventQueue>> queues;
    for (const std::string& p : prompts) {
      queues.push_back(std::make_shared<EventQueue>());
      Request r;
      r.prompt = loaded.tokenizer->encode(p, true);
      r.sampling.temperature = 0.0f;
      r.sampling.max_tokens = max_tokens;
      r.sampling.ignore_eos = true;
      r.sink = queues.back();
      engine.submit(std::move(r));
    }
    for (auto& q : queues) EXPECT_EQ(collect(*q).completion_tokens, max_tokens);
  }
  rec.stats = engine.stats();
  rec.layout = KvLayout::for_model(loaded.model->config(), o.kv_block_size, o.kv_type);
  return rec;
}

struct ReplayCount {
  int tokens = 0;      // sampled tokens compared (accepted drafts included)
  int mismatches = 0;  // of those, how many the replay's logits did not give
};

// Every recorded token must be the argmax of its row: a greedy token, or an accepted draft
// followed by the verifier's own token, row by row.
ReplayCount replay(PlanWorker& worker, const Recording& rec, int vocab, bool with_ops) {
  ReplayCount count;
  for (size_t i = 0; i < rec.plans.size(); ++i) {
    StepPlan plan = step_plan_from_json(nlohmann::json::parse(rec.plans[i].dump()));
    EXPECT_EQ(step_plan_to_json(plan), rec.plans[i]);
    if (!with_ops) plan.kv_ops.clear();
    const StepResult result = step_result_from_json(rec.results[i]);
    const std::span<const float> logits = worker.execute(plan);
    size_t row = 0, out = 0;
    for (const ScheduledSequence& s : plan.sequences) {
      const size_t first = row;
      row += static_cast<size_t>(s.logits_rows);
      if (s.logits_rows == 0 || s.padding) continue;
      if (out >= result.outputs.size()) break;
      const SequenceOutput& o = result.outputs[out++];
      EXPECT_EQ(o.request_id, s.request_id);
      EXPECT_LE(o.tokens.size(), static_cast<size_t>(s.logits_rows));
      for (size_t j = 0; j < o.tokens.size() && first + j < row; ++j) {
        ++count.tokens;
        if (argmax(logits.data() + (first + j) * vocab, vocab) != o.tokens[j].token) {
          ++count.mismatches;
        }
      }
    }
  }
  return count;
}

TEST(StepReplay, PlansWithPrefixCacheOffloadAndSpeculationReplayOnOtherMemory) {
  RAPIDE_REQUIRE_SHARED(kModel);
  LoadedForTest loaded = load_for_test(shared_path(kModel));
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "160KiB";  // 16 blocks: the rounds evict into the tier and restore from it
  o.max_context = 512;
  o.prefix_cache = true;
  o.kv_offload_ram = "4MiB";
  o.spec.mode = SpecMode::kNgram;
  o.spec.tokens = 4;
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her red ball. One day, she saw a big dog under a tree.";
  const std::vector<std::string> prompts = {
      story + " Where was the bone?", story + " What did Lily do next?",
      story + " Was the dog happy?", "The sun was hot. Tom and Sue went to the lake.",
      "A cat sat on the mat and looked at the bird."};
  const Recording rec = record(loaded, o, prompts, 3, 40);
  ASSERT_GT(rec.plans.size(), 10u);

  // The recording must hold every kind of move this test is about.
  std::map<std::string, int> kinds;
  for (const nlohmann::json& plan : rec.plans) {
    for (const nlohmann::json& op : plan["kv_ops"]) ++kinds[op["op"].get<std::string>()];
  }
  EXPECT_GT(kinds["offload"], 0) << "no block went to the tier";
  EXPECT_GT(kinds["restore"], 0) << "no prefix hit came from the tier";
  EXPECT_GT(kinds["copy_slots"] + kinds["copy"], 0) << "no block copy";
  EXPECT_GT(rec.stats.spec.accepted, 0u) << "no draft was accepted";
  EXPECT_GT(rec.stats.prefix_cache.ram_hit_tokens, 0u);

  // What followers receive: every recorded plan through the binary broadcast codec gives
  // the same plan back (compared as step_json), and costs less than step_json's text.
  size_t json_bytes = 0, binary_bytes = 0;
  double json_seconds = 0.0, binary_seconds = 0.0;
  for (const nlohmann::json& recorded : rec.plans) {
    const StepPlan plan = step_plan_from_json(recorded);
    TimePoint start = Clock::now();
    const std::string text = step_plan_to_json(plan).dump();
    const StepPlan from_text = step_plan_from_json(nlohmann::json::parse(text));
    json_seconds += seconds_between(start, Clock::now());
    start = Clock::now();
    const std::vector<uint8_t> bytes = encode_plan_broadcast(BroadcastHeader{}, plan);
    const PlanBroadcast back = decode_plan_broadcast(bytes);
    binary_seconds += seconds_between(start, Clock::now());
    ASSERT_EQ(step_plan_to_json(back.plan), recorded);
    EXPECT_EQ(from_text.sequences.size(), plan.sequences.size());
    json_bytes += text.size();
    binary_bytes += bytes.size();
  }
  std::printf(
      "%zu plans: binary %zu bytes (%.1f us to write and read), step_json %zu bytes "
      "(%.1f us)\n",
      rec.plans.size(), binary_bytes, 1e6 * binary_seconds, json_bytes, 1e6 * json_seconds);
  EXPECT_LT(binary_bytes, json_bytes);

  const int vocab = loaded.model->config().vocab_size;
  ThreadPool pool(2);
  OffloadTierOptions tier;
  tier.ram_bytes = parse_memory_budget(o.kv_offload_ram);
  {
    PlanWorker worker(*loaded.model, rec.layout, pool,
                      std::make_unique<OffloadTier>(tier, rec.layout, 1));
    const ReplayCount c = replay(worker, rec, vocab, true);
    EXPECT_GT(c.tokens, 5 * 3 * 40 / 2);
    EXPECT_EQ(c.mismatches, 0) << "of " << c.tokens << " tokens";
  }
  {
    // The ops are what makes it work: memory that skips them attends to the wrong K/V.
    PlanWorker worker(*loaded.model, rec.layout, pool,
                      std::make_unique<OffloadTier>(tier, rec.layout, 1));
    const ReplayCount c = replay(worker, rec, vocab, false);
    EXPECT_GT(c.mismatches, 0) << "a replay without the plans' KV ops gave every token";
  }
}

// A tensor/pipeline follower's tier (mirror_tier_options) has no capacity of its own: it lets
// a block go when the leader's tier does, told by the plan's forget ops. A leader tier small
// enough to drop blocks must emit them, and plans replayed on a mirror tier must still give
// every token (each restore finds its block).
TEST(StepReplay, AMirrorTierFollowsTheLeadersDropsAndServesEveryRestore) {
  RAPIDE_REQUIRE_SHARED(kModel);
  LoadedForTest loaded = load_for_test(shared_path(kModel));
  EngineOptions o;
  o.threads = 2;
  o.kv_memory = "120KiB";  // 12 blocks: every round evicts the last one's prefixes
  o.max_context = 512;
  o.prefix_cache = true;
  o.kv_offload_ram = "24KiB";  // a few compressed blocks: the tier drops as the rounds go
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her red ball. One day, she saw a big dog under a tree.";
  const std::vector<std::string> prompts = {
      story + " Where was the bone?", "The sun was hot. Tom and Sue went to the lake to swim.",
      story + " Was the dog happy?", "A cat sat on the mat and looked at the bird in the tree."};
  const Recording rec = record(loaded, o, prompts, 3, 24);
  std::map<std::string, int> kinds;
  for (const nlohmann::json& plan : rec.plans) {
    for (const nlohmann::json& op : plan["kv_ops"]) ++kinds[op["op"].get<std::string>()];
  }
  EXPECT_GT(kinds["forget"], 0) << "the leader's tier dropped nothing, or told nobody";
  EXPECT_GT(kinds["restore"], 0) << "no prefix hit came from the tier";
  EXPECT_GT(rec.stats.prefix_cache.offload.dropped_blocks, 0u);

  ThreadPool pool(2);
  OffloadTierOptions leader;
  leader.ram_bytes = parse_memory_budget(o.kv_offload_ram);
  PlanWorker worker(*loaded.model, rec.layout, pool,
                    std::make_unique<OffloadTier>(mirror_tier_options(leader, 1), rec.layout, 1));
  const ReplayCount c = replay(worker, rec, loaded.model->config().vocab_size, true);
  EXPECT_EQ(c.tokens, 4 * 3 * 24);
  EXPECT_EQ(c.mismatches, 0) << "of " << c.tokens << " tokens";
  // It forgot what the leader dropped: it holds no more than the leader stored.
  EXPECT_LT(worker.tier()->size(), static_cast<size_t>(kinds["offload"]));
}

TEST(StepJson, KvOpsRoundTripAndBadOnesAreRefused) {
  StepPlan plan;
  plan.step = 2;
  plan.kv_ops = every_kv_op();
  const nlohmann::json j = step_plan_to_json(plan);
  const StepPlan back = step_plan_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_EQ(back.kv_ops.size(), 6u);
  EXPECT_EQ(back.kv_ops[5].kind, KvOp::Kind::kForget);
  EXPECT_EQ(back.kv_ops[5].hash, 0xdeadu);
  EXPECT_EQ(step_plan_to_json(back), j);
  EXPECT_EQ(back.kv_ops[1].slots, 7);
  EXPECT_EQ(back.kv_ops[2].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(back.kv_ops[3].hash, 0xbeefu);
  EXPECT_EQ(*back.kv_ops[4].bytes, (std::vector<uint8_t>{0, 1, 0xab, 0xff}));
  nlohmann::json bad = j;
  bad["kv_ops"][0]["op"] = "teleport";
  EXPECT_THROW(step_plan_from_json(bad), Error);
  bad = j;
  bad["kv_ops"][4]["bytes"] = "0g";
  EXPECT_THROW(step_plan_from_json(bad), Error);
  bad = j;
  bad["kv_ops"][0].erase("dst");
  EXPECT_THROW(step_plan_from_json(bad), Error);
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
