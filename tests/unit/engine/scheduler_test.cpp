// The Scheduler alone: no model, no engine thread. Each test plans steps over a small
// PagedKvStore, feeds back fake step results (the tokens a sampler "drew", the finishes an
// output processor "decided"), and asserts the policy: what each plan contains, in which
// order, which sequence is preempted, when static batching admits, what a prefix hit skips.
// These are the rules outputs-only tests cannot see (an engine that preempts the oldest
// sequence instead of the youngest produces the same text).
// Progress (issue 53): after a verification the sequence keeps the K/V of the accepted
// guesses only and has its next token to feed; a sequence that can never run again, or a
// run of steps with nothing runnable, is reported as stalled instead of waiting forever.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "engine/proposer.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"

namespace rapide {
namespace {

constexpr int kBlock = 4;

// 1 layer x 1 KV head x 4 dims x 4 positions x K,V x f32 = 128 bytes a block.
KvLayout tiny_layout() {
  return KvLayout{1, 1, 4, kBlock, KvType::kF32};
}

EngineOptions options(int batch_tokens = 64, int chunk = 64,
                      BatchingMode mode = BatchingMode::kContinuous) {
  EngineOptions o;
  o.max_batch_tokens = batch_tokens;
  o.prefill_chunk = chunk;
  o.max_seqs = 8;
  o.batching = mode;
  o.prefix_cache = false;
  return o;
}

std::vector<int32_t> tokens_from(int32_t first, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct Fixture {
  Fixture(int blocks, EngineOptions o, bool with_prefix_cache = false, Proposer* proposer = nullptr)
      : kv(tiny_layout(), blocks, /*max_context=*/256) {
    if (with_prefix_cache) cache = std::make_unique<PrefixCache>(kv, /*identity=*/7, nullptr);
    scheduler = std::make_unique<Scheduler>(o, kv, cache.get(), proposer);
  }

  RequestId add(std::vector<int32_t> prompt, int max_generated = 100, int priority = 0) {
    auto s = std::make_unique<Sequence>();
    s->id = next_id;
    s->kv_id = static_cast<int32_t>(next_id);
    s->arrival_order = next_id;
    s->priority = priority;
    s->prompt_length = static_cast<int>(prompt.size());
    s->tokens = std::move(prompt);
    s->max_generated = max_generated;
    scheduler->add_waiting(std::move(s));
    return next_id++;
  }

  // What a sampler would produce: token `token` for every sequence with logits (padding
  // rows are never sampled); the ids in `finishing` end with kStop.
  static StepResult sampled(const StepPlan& plan, int32_t token,
                            const std::set<RequestId>& finishing = {}) {
    StepResult r;
    r.step = plan.step;
    for (const ScheduledSequence& s : plan.sequences) {
      if (s.logits_rows == 0 || s.padding) continue;
      SequenceOutput out;
      out.request_id = s.request_id;
      out.tokens.push_back({token, 0.0f, {}});
      if (finishing.count(s.request_id) != 0) out.finish = FinishReason::kStop;
      r.outputs.push_back(std::move(out));
    }
    return r;
  }

  // Plans one step and applies `token` to it; returns the plan.
  StepPlan step(int32_t token = 1000, const std::set<RequestId>& finishing = {},
                std::vector<FinishedRequest>* finished = nullptr) {
    StepPlan plan = scheduler->schedule();
    std::vector<FinishedRequest> f = scheduler->update(plan, sampled(plan, token, finishing));
    if (finished != nullptr) *finished = std::move(f);
    return plan;
  }

  PagedKvStore kv;
  std::unique_ptr<PrefixCache> cache;
  std::unique_ptr<Scheduler> scheduler;
  RequestId next_id = 1;
};

const ScheduledSequence* find(const StepPlan& plan, RequestId id) {
  for (const ScheduledSequence& s : plan.sequences) {
    if (s.request_id == id) return &s;
  }
  return nullptr;
}

std::vector<RequestId> ids(const StepPlan& plan) {
  std::vector<RequestId> out;
  for (const ScheduledSequence& s : plan.sequences) out.push_back(s.request_id);
  return out;
}

TEST(Scheduler, ChunkedPrefillThenDecodeFeedsEveryPositionOnce) {
  Fixture f(64, options(/*batch_tokens=*/64, /*chunk=*/4));
  const RequestId a = f.add(tokens_from(10, 10));

  StepPlan p = f.step();
  ASSERT_EQ(p.sequences.size(), 1u);
  EXPECT_EQ(p.sequences[0].start_position, 0);
  EXPECT_EQ(p.sequences[0].tokens, tokens_from(10, 4));
  EXPECT_EQ(p.sequences[0].logits_rows, 0);  // mid-prompt: nothing to sample
  EXPECT_FALSE(p.sequences[0].is_decode);
  EXPECT_EQ(p.prefill_tokens, 4);
  EXPECT_EQ(p.sequences[0].block_table.size(), 1u);

  p = f.step();
  EXPECT_EQ(p.sequences[0].start_position, 4);
  EXPECT_EQ(p.sequences[0].tokens, tokens_from(14, 4));
  EXPECT_EQ(p.sequences[0].block_table.size(), 2u);

  p = f.step(/*token=*/77);  // the last chunk samples the first generated token
  EXPECT_EQ(p.sequences[0].start_position, 8);
  EXPECT_EQ(p.sequences[0].tokens, tokens_from(18, 2));
  EXPECT_EQ(p.sequences[0].logits_rows, 1);
  EXPECT_EQ(f.scheduler->get(a)->generated(), 1);
  EXPECT_EQ(f.scheduler->get(a)->tokens.back(), 77);

  p = f.step();
  ASSERT_EQ(p.sequences.size(), 1u);
  EXPECT_TRUE(p.sequences[0].is_decode);
  EXPECT_EQ(p.sequences[0].start_position, 10);
  EXPECT_EQ(p.sequences[0].tokens, std::vector<int32_t>{77});
  EXPECT_EQ(p.decode_tokens, 1);
  EXPECT_EQ(p.prefill_tokens, 0);
  EXPECT_EQ(f.scheduler->get(a)->num_computed, 11);
}

TEST(Scheduler, DecodesComeFirstAndTheTokenBudgetCutsPrefill) {
  Fixture f(64, options(/*batch_tokens=*/6, /*chunk=*/64));
  const RequestId a = f.add(tokens_from(10, 3));
  f.step();  // a's whole prompt
  const RequestId b = f.add(tokens_from(40, 20));
  const RequestId c = f.add(tokens_from(80, 20));

  StepPlan p = f.step();
  ASSERT_EQ(ids(p), (std::vector<RequestId>{a, b}));  // c waits: the budget is spent
  EXPECT_TRUE(p.sequences[0].is_decode);
  EXPECT_EQ(p.sequences[1].tokens.size(), 5u);  // 6 - a's decode
  EXPECT_EQ(p.decode_tokens + p.prefill_tokens, 6);

  p = f.step();
  ASSERT_GE(p.sequences.size(), 2u);
  EXPECT_EQ(p.sequences[0].request_id, a);  // still first: decodes before any prefill
  EXPECT_EQ(p.sequences[1].request_id, b);
  EXPECT_EQ(p.sequences[1].start_position, 5);
  EXPECT_EQ(find(p, c), nullptr);
}

TEST(Scheduler, PreemptsTheYoungestOfTheLowestPriorityAndResumesIt) {
  // 7 blocks of 4: three 8-token prompts take 6; the next block any of them needs forces a
  // preemption.
  Fixture f(7, options());
  const RequestId a = f.add(tokens_from(10, 8));
  const RequestId b = f.add(tokens_from(30, 8));
  const RequestId c = f.add(tokens_from(50, 8));
  StepPlan p = f.step(/*token=*/1);
  ASSERT_EQ(p.sequences.size(), 3u);
  EXPECT_EQ(f.kv.free_blocks(), 1);
  // Decode: a takes the last free block, b then needs one: c, the youngest, gives way.
  p = f.step(/*token=*/2);
  EXPECT_EQ(p.preempted, std::vector<RequestId>{c});
  EXPECT_EQ(ids(p), (std::vector<RequestId>{a, b}));
  const Sequence* sc = f.scheduler->get(c);
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->status, SequenceStatus::kWaiting);
  EXPECT_EQ(sc->num_computed, 0);    // its KV is gone ...
  EXPECT_EQ(sc->tokens.size(), 9u);  // ... its prompt and generated token are kept
  EXPECT_EQ(sc->preemptions, 1);

  // a finishes: its blocks come back and c is re-admitted, recomputing prompt + generated.
  std::vector<FinishedRequest> finished;
  p = f.step(/*token=*/3, {a}, &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].request_id, a);
  EXPECT_EQ(finished[0].completion_tokens, 3);
  p = f.step(/*token=*/4);
  const ScheduledSequence* resumed = find(p, c);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->start_position, 0);
  EXPECT_EQ(resumed->tokens.size(), 9u);
  EXPECT_EQ(resumed->tokens.back(), 1);  // the token it had generated before preemption
  EXPECT_EQ(resumed->logits_rows, 1);
  EXPECT_EQ(f.scheduler->get(c)->tokens.back(), 4);  // and it continues from there
}

TEST(Scheduler, PriorityOutranksAgeWhenChoosingWhomToPreempt) {
  Fixture f(7, options());
  const RequestId a = f.add(tokens_from(10, 8), 100, /*priority=*/0);
  const RequestId b = f.add(tokens_from(30, 8), 100, /*priority=*/0);
  const RequestId c = f.add(tokens_from(50, 8), 100, /*priority=*/5);
  f.step();
  const StepPlan p = f.step();
  // c is the youngest but runs at a higher priority: b, the youngest of priority 0, goes.
  EXPECT_EQ(p.preempted, std::vector<RequestId>{b});
  EXPECT_NE(find(p, a), nullptr);
  EXPECT_NE(find(p, c), nullptr);
}

TEST(Scheduler, NothingIsAdmittedInAStepThatPreempted) {
  Fixture f(7, options());
  f.add(tokens_from(10, 8));
  f.add(tokens_from(30, 8));
  const RequestId c = f.add(tokens_from(50, 8));
  f.step();
  // One block is free once c goes, and d (first in the queue by priority) needs just one.
  const RequestId d = f.add(tokens_from(70, 1), 100, /*priority=*/1);
  const StepPlan p = f.step();
  EXPECT_EQ(p.preempted, std::vector<RequestId>{c});
  EXPECT_EQ(find(p, d), nullptr);  // admitting now would only thrash
  EXPECT_EQ(f.scheduler->get(d)->status, SequenceStatus::kWaiting);
}

TEST(Scheduler, StaticBatchingAdmitsOnlyIntoAnEmptyEngineAndPadsFinishedRows) {
  Fixture f(64, options(64, 64, BatchingMode::kStatic));
  const RequestId a = f.add(tokens_from(10, 4));
  const RequestId b = f.add(tokens_from(20, 4));
  StepPlan p = f.step();
  ASSERT_EQ(ids(p), (std::vector<RequestId>{a, b}));
  const RequestId c = f.add(tokens_from(30, 4));  // arrives while the batch runs

  // a finishes: its client hears at once, but its row keeps computing as padding.
  std::vector<FinishedRequest> finished;
  p = f.step(/*token=*/5, {a}, &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].request_id, a);
  EXPECT_EQ(find(p, c), nullptr);  // room enough, but the batch is busy
  const int32_t held = f.kv.used_blocks();
  p = f.step(/*token=*/6);
  const ScheduledSequence* pad = find(p, a);
  ASSERT_NE(pad, nullptr);
  EXPECT_TRUE(pad->padding);
  EXPECT_EQ(pad->tokens, std::vector<int32_t>{5});  // its last token, repeated
  EXPECT_EQ(find(p, c), nullptr);
  EXPECT_GE(f.kv.used_blocks(), held);  // the padded row keeps its blocks
  EXPECT_EQ(f.scheduler->get(a)->tokens.back(), 5);
  EXPECT_TRUE(f.scheduler->get(a)->padding);

  // b finishes: the batch is over, its padding freed, and c starts a new batch alone.
  p = f.step(/*token=*/7, {b}, &finished);
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_NE(find(p, a), nullptr);  // the padded row advanced and is computed again
  EXPECT_EQ(find(p, a)->tokens, std::vector<int32_t>{5});
  EXPECT_EQ(find(p, a)->start_position, 6);
  EXPECT_EQ(finished[0].request_id, b);
  p = f.step();
  EXPECT_EQ(ids(p), std::vector<RequestId>{c});
  EXPECT_EQ(f.scheduler->get(a), nullptr);
  EXPECT_EQ(f.scheduler->get(b), nullptr);
}

TEST(Scheduler, ContinuousBatchingAdmitsIntoARunningBatch) {
  Fixture f(64, options());
  const RequestId a = f.add(tokens_from(10, 4));
  f.step();
  const RequestId c = f.add(tokens_from(30, 4));
  const StepPlan p = f.step();
  EXPECT_EQ(ids(p), (std::vector<RequestId>{a, c}));
}

TEST(Scheduler, StaticBatchingPromisesWholePromptsBeforeAdmitting) {
  // 5 blocks: a's 12-token prompt needs 3; b's 12 would need 3 more: b waits for the next
  // batch although its first chunk alone would fit.
  Fixture f(5, options(64, 4, BatchingMode::kStatic));
  const RequestId a = f.add(tokens_from(10, 12));
  const RequestId b = f.add(tokens_from(30, 12));
  const StepPlan p = f.step();
  EXPECT_EQ(ids(p), std::vector<RequestId>{a});
  EXPECT_EQ(f.scheduler->get(b)->status, SequenceStatus::kWaiting);
}

TEST(Scheduler, APrefixHitSkipsTheCachedBlocks) {
  Fixture f(64, options(), /*with_prefix_cache=*/true);
  std::vector<int32_t> shared = tokens_from(10, 8);  // two whole blocks
  std::vector<int32_t> first = shared;
  first.insert(first.end(), {90, 91, 92});
  const RequestId a = f.add(first);
  std::vector<FinishedRequest> finished;
  f.step(/*token=*/1, {a}, &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].cached_prompt_tokens, 0);

  std::vector<int32_t> second = shared;
  second.insert(second.end(), {60, 61, 62});
  const RequestId b = f.add(second);
  const StepPlan p = f.step(/*token=*/2, {b}, &finished);
  const ScheduledSequence* s = find(p, b);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->start_position, 8);  // the shared blocks are not fed again
  EXPECT_EQ(s->tokens, (std::vector<int32_t>{60, 61, 62}));
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].cached_prompt_tokens, 8);

  // A prompt that differs inside the first block reuses nothing.
  std::vector<int32_t> third = shared;
  third[2] = 500;
  const RequestId c = f.add(third);
  const StepPlan q = f.step();
  ASSERT_NE(find(q, c), nullptr);
  EXPECT_EQ(find(q, c)->start_position, 0);
}

TEST(Scheduler, AbortFreesBlocksAndForgetsTheRequest) {
  Fixture f(64, options());
  const RequestId a = f.add(tokens_from(10, 9));
  const RequestId b = f.add(tokens_from(30, 5));
  f.step();
  EXPECT_GT(f.kv.used_blocks(), 0);
  const auto fa = f.scheduler->finish(a, FinishReason::kAbort);
  ASSERT_TRUE(fa.has_value());
  EXPECT_EQ(fa->reason, FinishReason::kAbort);
  EXPECT_EQ(fa->completion_tokens, 1);
  EXPECT_EQ(f.scheduler->get(a), nullptr);
  EXPECT_FALSE(f.scheduler->finish(a, FinishReason::kAbort).has_value());  // only once
  const StepPlan p = f.step();
  EXPECT_EQ(ids(p), std::vector<RequestId>{b});
  f.scheduler->finish(b, FinishReason::kAbort);
  EXPECT_EQ(f.kv.used_blocks(), 0);
  EXPECT_TRUE(f.scheduler->idle());
}

TEST(Scheduler, AFinishedSequenceLeavesBeforeItsClientHears) {
  Fixture f(64, options());
  const RequestId a = f.add(tokens_from(10, 6));
  std::vector<FinishedRequest> finished;
  f.step(/*token=*/3, {a}, &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].reason, FinishReason::kStop);
  EXPECT_EQ(finished[0].prompt_tokens, 6);
  EXPECT_EQ(finished[0].completion_tokens, 1);
  EXPECT_EQ(f.kv.used_blocks(), 0);  // update freed the blocks already
  EXPECT_TRUE(f.scheduler->idle());
}

TEST(Scheduler, StepsAreNumberedAndPlansOwnTheirData) {
  Fixture f(64, options());
  f.add(tokens_from(10, 4));
  const StepPlan p1 = f.step(/*token=*/9);
  const StepPlan p2 = f.step();
  EXPECT_EQ(p1.step + 1, p2.step);
  // The first plan still says what it fed, whatever the sequence did afterwards.
  EXPECT_EQ(p1.sequences[0].tokens, tokens_from(10, 4));
  EXPECT_EQ(p2.sequences[0].tokens, std::vector<int32_t>{9});
}

// Guesses 7, 8, 9, ... (as many as asked) for every sequence.
class CountingProposer final : public Proposer {
 public:
  const char* name() const override { return "counting"; }
  void propose(std::span<ProposalRequest> requests) override {
    for (ProposalRequest& r : requests) {
      for (int i = 0; i < r.k; ++i) r.guesses.push_back(7 + i);
    }
  }
};

// One output: the accepted guesses, then the target's own token.
StepResult verified(const StepPlan& plan, RequestId id, std::vector<int32_t> emitted) {
  StepResult r;
  r.step = plan.step;
  SequenceOutput out;
  out.request_id = id;
  for (int32_t t : emitted) out.tokens.push_back({t, 0.0f, {}});
  r.outputs.push_back(std::move(out));
  return r;
}

TEST(Scheduler, AVerificationKeepsTheAcceptedGuessesAndLeavesOneTokenToFeed) {
  CountingProposer proposer;
  EngineOptions o = options();
  o.spec.mode = SpecMode::kNgram;
  o.spec.tokens = 3;
  // accepted guesses -> what the target emits: the accepted ones, then its own token 20.
  const std::vector<std::vector<int32_t>> cases = {{20}, {7, 20}, {7, 8, 20}, {7, 8, 9, 20}};
  for (size_t accepted = 0; accepted < cases.size(); ++accepted) {
    Fixture f(64, o, /*with_prefix_cache=*/false, &proposer);
    const RequestId a = f.add(tokens_from(10, 6));
    f.step(/*token=*/50);  // the prompt, then the first token
    StepPlan p = f.scheduler->schedule();
    ASSERT_EQ(p.sequences.size(), 1u);
    ASSERT_EQ(p.sequences[0].draft_tokens, (std::vector<int32_t>{7, 8, 9}));
    EXPECT_EQ(p.sequences[0].start_position, 6);
    f.scheduler->update(p, verified(p, a, cases[accepted]));

    const Sequence* s = f.scheduler->get(a);
    ASSERT_NE(s, nullptr);
    // Positions computed: the prompt, the decode token, the accepted guesses.
    EXPECT_EQ(s->num_computed, 6 + 1 + static_cast<int>(accepted)) << accepted << " accepted";
    EXPECT_EQ(s->uncomputed(), 1) << accepted << " accepted";
    EXPECT_EQ(f.scheduler->spec_stats().accepted, accepted);
    // The next step feeds the target's token where the accepted run ended.
    p = f.scheduler->schedule();
    ASSERT_EQ(p.sequences.size(), 1u) << accepted << " accepted";
    EXPECT_EQ(p.sequences[0].start_position, s->num_computed);
    EXPECT_EQ(p.sequences[0].tokens, std::vector<int32_t>{20});
    EXPECT_TRUE(f.scheduler->take_stalled().empty());
  }
}

TEST(Scheduler, ASequenceWithNothingToFeedIsReportedStalled) {
  Fixture f(64, options());
  // What a bug in update() could leave: every token counted as computed (its K/V are not).
  auto s = std::make_unique<Sequence>();
  s->id = 5;
  s->kv_id = 5;
  s->tokens = tokens_from(10, 6);
  s->prompt_length = 6;
  s->num_computed = 6;
  s->max_generated = 10;
  f.scheduler->add_waiting(std::move(s));
  const RequestId ok = f.add(tokens_from(40, 4));
  f.step();  // admitted, nothing planned for 5
  const StepPlan p = f.scheduler->schedule();
  EXPECT_EQ(find(p, 5), nullptr);
  EXPECT_NE(find(p, ok), nullptr);  // the others run on
  const std::vector<Scheduler::Stalled> stalled = f.scheduler->take_stalled();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].id, 5u);
  EXPECT_NE(stalled[0].why.find("no token left to feed"), std::string::npos) << stalled[0].why;
  EXPECT_TRUE(f.scheduler->take_stalled().empty());  // handed over once
  ASSERT_TRUE(f.scheduler->finish(5, FinishReason::kError).has_value());
}

TEST(Scheduler, StepsWithNothingRunnableReportEveryLiveRequestAfterTheLimit) {
  EngineOptions o = options();
  o.stall_steps = 5;
  Fixture f(64, o);
  // A request that can never be admitted (an empty prompt, which submit() refuses) keeps the
  // scheduler busy with nothing to run.
  const RequestId stuck = f.add({});
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(f.scheduler->schedule().empty());
    EXPECT_TRUE(f.scheduler->take_stalled().empty()) << "step " << i;
  }
  EXPECT_TRUE(f.scheduler->schedule().empty());
  const std::vector<Scheduler::Stalled> stalled = f.scheduler->take_stalled();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].id, stuck);
  EXPECT_NE(stalled[0].why.find("nothing could run for 5 consecutive steps"), std::string::npos)
      << stalled[0].why;
  // A runnable step starts the count again.
  f.scheduler->finish(stuck, FinishReason::kError);
  f.add(tokens_from(10, 4));
  for (int i = 0; i < 10; ++i) f.step();
  EXPECT_TRUE(f.scheduler->take_stalled().empty());
}

}  // namespace
}  // namespace rapide
