// What tensor- and pipeline-parallel followers receive (engine/plan_broadcast.h) and how a
// pass no scheduler planned becomes a plan (engine/batch_plan.h): the binary codec carries
// every field step_json carries and refuses what is not an encoded plan; plan_for_batch and
// batch_for_plan are inverses, so a follower runs exactly the leader's batch. The engine's
// own plans (prefix cache, offload tier, speculation) round-trip in step_replay_test.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/batch_plan.h"
#include "engine/plan_broadcast.h"
#include "engine/step_json.h"
#include "every_kv_op.h"
#include "model/contiguous_kv_store.h"

namespace rapide {
namespace {

StepPlan sample_plan() {
  StepPlan plan;
  plan.step = 41;
  ScheduledSequence a;
  a.request_id = 0x1234567890ull;
  a.kv_id = 3;
  a.start_position = 17;
  a.tokens = {5};
  a.draft_tokens = {6, 7, 8};
  a.logits_rows = 4;
  a.block_table = {9, 2, -1, 4};
  a.is_decode = true;
  ScheduledSequence b;
  b.request_id = 2;
  b.kv_id = 0;
  b.tokens = {1, 2, 3, 4, 5, 6};
  b.block_table = {0};
  b.padding = true;
  plan.sequences = {a, b};
  plan.preempted = {77, 78};
  plan.kv_ops = testing::every_kv_op();
  plan.prefill_tokens = 6;
  plan.decode_tokens = 1;
  return plan;
}

TEST(PlanBroadcast, EveryFieldRoundTrips) {
  const StepPlan plan = sample_plan();
  BroadcastHeader header;
  header.kv_block_size = 32;
  header.kv_type = KvType::kQ4_0;
  header.hidden_only = true;
  OffloadTierOptions tier;
  tier.ram_bytes = 3 << 20;
  tier.dir = "/tmp/some dir";
  tier.disk_bytes = 5ull << 30;
  tier.codec = OffloadCodec::kZstd;
  header.tier = tier;
  const PlanBroadcast back = decode_plan_broadcast(encode_plan_broadcast(header, plan));
  EXPECT_EQ(step_plan_to_json(back.plan), step_plan_to_json(plan));
  EXPECT_EQ(back.header.kv_block_size, 32);
  EXPECT_EQ(back.header.kv_type, KvType::kQ4_0);
  EXPECT_TRUE(back.header.hidden_only);
  ASSERT_TRUE(back.header.tier.has_value());
  EXPECT_EQ(back.header.tier->ram_bytes, tier.ram_bytes);
  EXPECT_EQ(back.header.tier->disk_bytes, tier.disk_bytes);
  EXPECT_EQ(back.header.tier->dir, tier.dir);
  EXPECT_EQ(back.header.tier->codec, OffloadCodec::kZstd);
  // Without a tier: none comes back.
  header.tier.reset();
  EXPECT_FALSE(decode_plan_broadcast(encode_plan_broadcast(header, plan)).header.tier);
}

TEST(PlanBroadcast, BytesThatAreNotABroadcastAreRefused) {
  const std::vector<uint8_t> bytes = encode_plan_broadcast(BroadcastHeader{}, sample_plan());
  const auto refused = [](std::span<const uint8_t> b) {
    try {
      decode_plan_broadcast(b);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kCorrupt;
    }
    return false;
  };
  // Every truncation, not only the last byte: a count must never be read past the end.
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_TRUE(refused(std::span<const uint8_t>(bytes.data(), n))) << n << " bytes";
  }
  std::vector<uint8_t> bad = bytes;
  bad[0] ^= 1;
  EXPECT_TRUE(refused(bad)) << "bad magic";
  bad = bytes;
  bad.push_back(0);
  EXPECT_TRUE(refused(bad)) << "trailing byte";
  EXPECT_FALSE(refused(bytes));
}

TEST(BatchPlan, PlanForBatchRunsExactlyTheBatch) {
  ModelConfig config;
  config.n_layers = 1;
  config.n_kv_heads = 1;
  config.head_dim = 4;
  ContiguousKvStore kv(config, 3, 64, KvType::kF16, 16);
  // Interleaved sequences, a position gap, logits rows in the middle of a run and a run
  // that starts with one: every case that forces a new ScheduledSequence.
  Batch batch;
  batch.add(10, 0, 0, false);
  batch.add(11, 0, 1, false);
  batch.add(12, 0, 2, true);
  batch.add(13, 0, 3, false);  // after a logits row: a new run
  batch.add(14, 2, 5, true);
  batch.add(15, 2, 6, true);
  batch.add(16, 0, 4, false);  // back to sequence 0
  batch.add(17, 0, 9, true);   // a gap in positions
  batch.add(18, 1, 0, false);
  const StepPlan plan = plan_for_batch(batch, kv);
  EXPECT_EQ(plan.sequences.size(), 6u);
  Batch back;
  batch_for_plan(plan, back);
  EXPECT_EQ(back.tokens, batch.tokens);
  EXPECT_EQ(back.seq_ids, batch.seq_ids);
  EXPECT_EQ(back.positions, batch.positions);
  EXPECT_EQ(back.needs_logits, batch.needs_logits);
  for (const ScheduledSequence& s : plan.sequences) {
    const auto table = kv.block_table(s.kv_id);
    EXPECT_TRUE(std::equal(table.begin(), table.end(), s.block_table.begin(), s.block_table.end()))
        << "sequence " << s.kv_id;
  }
}

}  // namespace
}  // namespace rapide
