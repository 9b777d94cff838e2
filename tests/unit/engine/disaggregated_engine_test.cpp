// Prefill/decode disaggregation in one process (engine/remote_prefill.h): a RemotePrefill
// whose "prefill rank" is a PrefillWorker on its own copy of the model, its answers passed
// through the wire format (distributed/kv_transfer_wire.h). The decode engine must produce exactly
// a colocated engine's greedy tokens, computing only the prompts' last partial blocks, and
// report what moved; a prefill side that never answers fails requests with kUnavailable
// after the timeout instead of leaving them waiting. (The MPI transport itself is tested by
// e2e_mpi_disaggregation.)
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/kv_transfer_wire.h"
#include "engine/engine.h"
#include "engine/prefill_worker.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

EngineOptions options() {
  EngineOptions o;
  o.kv_type = KvType::kF16;
  o.threads = 2;
  o.kv_memory = "64MiB";
  o.max_context = 512;
  o.prefix_cache = true;
  return o;
}

// Answers every request at the engine's next poll, or never while `silent`.
class InProcessPrefill final : public RemotePrefill {
 public:
  InProcessPrefill(Model& model, const EngineOptions& o) : worker_(model, o) {}
  void request(RequestId id, std::span<const int32_t> tokens) override {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({id, std::vector<int32_t>(tokens.begin(), tokens.end())});
    ++requests_;
  }
  std::vector<PrefilledKv> poll() override {
    std::vector<PrefilledKv> out;
    std::lock_guard<std::mutex> lock(mutex_);
    if (silent_) return out;
    for (const Pending& p : pending_) {
      out.push_back(decode_kv_frame(encode_kv_frame(worker_.prefill(p.id, p.tokens))));
    }
    pending_.clear();
    return out;
  }
  void set_silent(bool silent) {
    std::lock_guard<std::mutex> lock(mutex_);
    silent_ = silent;
  }
  int requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  struct Pending {
    RequestId id;
    std::vector<int32_t> tokens;
  };
  PrefillWorker worker_;
  std::mutex mutex_;
  std::vector<Pending> pending_;
  bool silent_ = false;
  int requests_ = 0;
};

class DisaggregatedEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    const std::string path = shared_path("models/stories260K/stories260K.gguf");
    decode_ = load_for_test(path);
    prefill_ = load_for_test(path);
  }
  Outcome run(Engine& engine, const std::string& text, int max_tokens = 24) const {
    Request r;
    r.prompt = decode_.tokenizer->encode(text, true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    auto q = std::make_shared<EventQueue>();
    r.sink = q;
    engine.submit(std::move(r));
    return collect(*q);
  }
  LoadedForTest decode_, prefill_;
};

const char* kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her red ball. One day, she saw a big dog under a tree.",
    "Tom had a big red car. He liked to drive it to the shop every day, and he sang songs "
    "while he drove. One day the car would not start, so Tom",
    "The sun was hot.",  // under one block: computed on the decode side alone
};

TEST_F(DisaggregatedEngine, GivesTheColocatedGreedyTokensAndReportsTheTransfer) {
  std::vector<Outcome> colocated;
  {
    Engine engine(*decode_.model, *decode_.tokenizer, options());
    for (const char* p : kPrompts) colocated.push_back(run(engine, p));
  }
  InProcessPrefill remote(*prefill_.model, options());
  Engine engine(*decode_.model, *decode_.tokenizer, options());
  engine.set_remote_prefill(&remote, std::chrono::seconds(60));
  const int bs = options().kv_block_size;
  for (size_t i = 0; i < std::size(kPrompts); ++i) {
    const Outcome o = run(engine, kPrompts[i]);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.tokens, colocated[i].tokens) << kPrompts[i];
    const int prompt = static_cast<int>(decode_.tokenizer->encode(kPrompts[i], true).size());
    const int blocks = (prompt - 1) / bs;
    EXPECT_EQ(o.kv_transfer.remote, blocks > 0) << kPrompts[i];
    EXPECT_EQ(o.kv_transfer.blocks, blocks);
    // Only the last partial block was computed here.
    EXPECT_EQ(o.cached_prompt_tokens, blocks * bs);
    if (blocks > 0) {
      EXPECT_GT(o.kv_transfer.bytes, static_cast<uint64_t>(blocks) * 1000);
      EXPECT_GT(o.kv_transfer.wait_seconds, 0.0);
      EXPECT_GT(o.kv_transfer.prefill_seconds, 0.0);
    }
  }
  EXPECT_EQ(remote.requests(), 2);
  // A prompt whose blocks are cached here already is not sent again.
  const Outcome again = run(engine, kPrompts[0]);
  EXPECT_EQ(again.tokens, colocated[0].tokens);
  EXPECT_FALSE(again.kv_transfer.remote);
  EXPECT_EQ(remote.requests(), 2);
}

TEST_F(DisaggregatedEngine, APrefillSideThatNeverAnswersFailsRequestsAfterTheTimeout) {
  InProcessPrefill remote(*prefill_.model, options());
  remote.set_silent(true);
  Engine engine(*decode_.model, *decode_.tokenizer, options());
  engine.set_remote_prefill(&remote, std::chrono::milliseconds(300));
  const TimePoint start = Clock::now();
  const Outcome o = run(engine, kPrompts[1]);
  EXPECT_EQ(o.reason, FinishReason::kError);
  EXPECT_EQ(o.error_code, ErrorCode::kUnavailable);
  EXPECT_NE(o.error.find("--disagg-timeout-ms"), std::string::npos) << o.error;
  EXPECT_GE(seconds_between(start, Clock::now()), 0.3);
  EXPECT_LT(seconds_between(start, Clock::now()), 10.0);
  // A short prompt does not need the prefill side, and the engine still serves.
  const Outcome shortish = run(engine, kPrompts[2]);
  EXPECT_TRUE(shortish.error.empty()) << shortish.error;
  EXPECT_EQ(shortish.completion_tokens, 24);
  // Draining does not wait for a request stuck on the silent side beyond its timeout.
  EXPECT_TRUE(engine.drain(std::chrono::seconds(5)));
}

TEST_F(DisaggregatedEngine, PromptsUnderTheThresholdAreComputedOnTheDecodeSide) {
  std::string shorter = kPrompts[0], longer = kPrompts[1];
  const auto tokens = [&](const std::string& t) {
    return static_cast<int>(decode_.tokenizer->encode(t, true).size());
  };
  if (tokens(shorter) > tokens(longer)) std::swap(shorter, longer);
  ASSERT_LT(tokens(shorter), tokens(longer));
  InProcessPrefill remote(*prefill_.model, options());
  Engine engine(*decode_.model, *decode_.tokenizer, options());
  engine.set_remote_prefill(&remote, std::chrono::seconds(60), tokens(longer));
  EXPECT_FALSE(run(engine, shorter).kv_transfer.remote);
  EXPECT_EQ(remote.requests(), 0);
  EXPECT_TRUE(run(engine, longer).kv_transfer.remote);
  EXPECT_EQ(remote.requests(), 1);
}

TEST_F(DisaggregatedEngine, RefusedWithoutThePrefixCache) {
  EngineOptions o = options();
  o.prefix_cache = false;
  InProcessPrefill remote(*prefill_.model, options());
  Engine engine(*decode_.model, *decode_.tokenizer, o);
  EXPECT_THROW(engine.set_remote_prefill(&remote, std::chrono::seconds(1)), Error);
}

}  // namespace
}  // namespace rapide::testing
