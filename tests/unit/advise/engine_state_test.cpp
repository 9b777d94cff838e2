#include <gtest/gtest.h>

#include <vector>

#include "advise/engine_state.h"
#include "base/error.h"
#include "engine/prefix_sharing.h"

namespace rapide::advise {
namespace {

TEST(EngineState, JsonRoundTripKeepsEveryFigure) {
  EngineState s;
  s.model.name = "m";
  s.model.weight_bytes = 123456789;
  s.model.parameters = 1000;
  s.machine.read_bandwidth = 12.5e9;
  s.config.batching = "static";
  s.config.kv_block_size = 32;
  StepRecord r;
  r.seconds = 0.25;
  r.forward_seconds = 0.2;
  r.padding_rows = 3;
  r.kv_reserved_positions = 99;
  s.steps.push_back(r);
  s.step_totals.add(4, 0, 4, 1, 0, 4, 2, 10, 0.5);
  s.requests.push_back({1.5, 0.1, 0.2, 0.03, 3.0, 10, 20, 5, 1, "length", 16, 9});
  s.prompts = {"first prompt", "second\nprompt"};
  PrefixMissRecord m;
  m.before = "abc";
  m.same_characters = 7;
  s.misses.push_back(m);
  s.sharing = {3, 300, 100, 2};
  s.spec = {true, 5, 20, 10, 15};
  s.decode_curve = {96, {{1, 0.002}, {4, 0.003}, {16, 0.009}}};
  const EngineState t = state_from_json(nlohmann::json::parse(state_to_json(s).dump()));
  EXPECT_DOUBLE_EQ(t.steps.at(0).forward_seconds, 0.2);
  EXPECT_EQ(t.decode_curve.context, 96);
  ASSERT_EQ(t.decode_curve.points.size(), 3u);
  EXPECT_EQ(t.decode_curve.points[2].rows, 16);
  EXPECT_DOUBLE_EQ(t.decode_curve.points[2].seconds, 0.009);
  EXPECT_EQ(t.model.weight_bytes, 123456789u);
  EXPECT_DOUBLE_EQ(t.machine.read_bandwidth, 12.5e9);
  EXPECT_EQ(t.config.batching, "static");
  EXPECT_EQ(t.steps.at(0).padding_rows, 3);
  EXPECT_EQ(t.steps.at(0).kv_reserved_positions, 99);
  EXPECT_EQ(t.step_totals.decode_only.steps, 1u);
  EXPECT_EQ(t.step_totals.padding_rows, 1u);
  EXPECT_EQ(t.step_totals.max_waiting, 2);
  EXPECT_EQ(t.requests.at(0).finish, "length");
  EXPECT_DOUBLE_EQ(t.requests.at(0).tpot, 0.03);
  EXPECT_EQ(t.misses.at(0).before, "abc");
  EXPECT_EQ(t.sharing.shareable_tokens, 100u);
  EXPECT_DOUBLE_EQ(t.spec.acceptance(), 0.5);
  EXPECT_EQ(t.requests.at(0).lookup_hits, 9);
  EXPECT_EQ(t.prompts, s.prompts);
}

TEST(EngineState, RefusesOtherDocuments) {
  EXPECT_THROW(state_from_json(nlohmann::json{{"runs", 1}}), Error);
  EXPECT_THROW(state_from_json(nlohmann::json{{"kind", "rapide.engine_state"}, {"steps", 3}}),
               Error);
}

TEST(PrefixSharingProbe, CountsLeadingBlocksSeenBefore) {
  PrefixSharingProbe probe(4, 7);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<int32_t> b = a;
  b[5] = 60;  // second block differs: only the first is shared
  probe.observe(a);
  probe.observe(b);
  probe.observe(a);
  EXPECT_EQ(probe.stats().prompts, 3u);
  EXPECT_EQ(probe.stats().prompt_tokens, 30u);
  EXPECT_EQ(probe.stats().shareable_tokens, 4u + 8u);
  EXPECT_EQ(probe.stats().sharing_prompts, 2u);
  // a's two blocks recurred (the first twice: counted once): the cache must keep two.
  EXPECT_EQ(probe.stats().recurring_blocks, 2u);
  // A different first block shares nothing even if later tokens agree.
  std::vector<int32_t> c = a;
  c[0] = 100;
  probe.observe(c);
  EXPECT_EQ(probe.stats().shareable_tokens, 12u);
}

}  // namespace
}  // namespace rapide::advise
