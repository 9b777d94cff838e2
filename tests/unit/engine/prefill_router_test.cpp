// PrefillRouter: which of several prefill ranks computes a prompt (engine/prefill_router.h).
#include "engine/prefill_router.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rapide {
namespace {

TEST(PrefillRouter, SequentialPromptsAlternateBetweenIdleRanks) {
  PrefillRouter router(3);
  // Each answered before the next is sent: every rank idle, the least used one wins.
  std::vector<int> chosen;
  for (RequestId id = 1; id <= 6; ++id) {
    chosen.push_back(router.route(id, 64));
    EXPECT_EQ(router.answered(id), chosen.back());
  }
  EXPECT_EQ(chosen, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  for (const PrefillRankLoad& l : router.loads()) {
    EXPECT_EQ(l.routed_prompts, 2u);
    EXPECT_EQ(l.outstanding_tokens, 0u);
  }
}

TEST(PrefillRouter, TheRankWithTheFewestOutstandingTokensGetsTheNextPrompt) {
  PrefillRouter router(2);
  EXPECT_EQ(router.route(1, 4000), 0);  // a long document
  EXPECT_EQ(router.route(2, 100), 1);
  // Rank 1 is behind by 100 tokens, rank 0 by 4000: short prompts keep going to rank 1 until
  // its queue is as long, even though it was given more prompts.
  EXPECT_EQ(router.route(3, 100), 1);
  EXPECT_EQ(router.route(4, 100), 1);
  EXPECT_EQ(router.loads()[1].outstanding_tokens, 300u);
  EXPECT_EQ(router.loads()[1].outstanding_prompts, 3u);
  EXPECT_EQ(router.answered(1), 0);
  EXPECT_EQ(router.route(5, 100), 0);  // rank 0 drained
}

TEST(PrefillRouter, ARankThatStopsAnsweringIsAvoided) {
  PrefillRouter router(2);
  EXPECT_EQ(router.route(1, 50), 0);  // never answered: rank 0 hangs
  for (RequestId id = 2; id < 10; ++id) {
    EXPECT_EQ(router.route(id, 40), 1) << id;
    EXPECT_EQ(router.answered(id), 1);
  }
  EXPECT_EQ(router.answered(1), 0);   // it came back late
  EXPECT_EQ(router.answered(1), -1);  // once only
  EXPECT_EQ(router.answered(99), -1);
}

TEST(PrefillRouter, RefusesNoRanksAndTwiceTheSameRequest) {
  EXPECT_THROW(PrefillRouter(0), Error);
  PrefillRouter router(1);
  router.route(7, 16);
  EXPECT_THROW(router.route(7, 16), Error);
}

}  // namespace
}  // namespace rapide
