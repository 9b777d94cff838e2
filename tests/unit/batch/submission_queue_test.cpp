// Requests that can reuse another's KV blocks wait until it has started; the rest go at once.
#include <gtest/gtest.h>

#include "batch/submission_queue.h"

namespace rapide::batch {
namespace {

BatchRequest request(uint64_t line, std::vector<int32_t> prompt) {
  BatchRequest r;
  r.line = line;
  r.spec.prompts = {std::move(prompt)};
  return r;
}

// Sorted: A [1 2 3 4 5], B [1 2 3 4 6], C [1 2 3 9], D [1 2 7], E [5 5]; blocks of 2 tokens.
std::vector<BatchRequest> window() {
  return {request(5, {5, 5}), request(3, {1, 2, 3, 9}), request(1, {1, 2, 3, 4, 5}),
          request(4, {1, 2, 7}), request(2, {1, 2, 3, 4, 6})};
}

TEST(SubmissionQueue, DependenciesPointAtTheEarliestRequestHoldingTheBlocks) {
  std::vector<BatchRequest> w = window();
  order_window(w, BatchOrder::kPrefix);
  // B reuses 2 blocks of A; C and D reuse 1 block, which A computes (not B or C).
  EXPECT_EQ(reuse_dependencies(w, 2), (std::vector<int>{-1, 0, 0, 0, -1}));
  // With 4-token blocks only B shares a whole block (with A).
  EXPECT_EQ(reuse_dependencies(w, 4), (std::vector<int>{-1, 0, -1, -1, -1}));
}

TEST(SubmissionQueue, SharersWaitForTheirSourceToStart) {
  SubmissionQueue queue(BatchOrder::kPrefix, 2);
  queue.add_window(window());
  EXPECT_EQ(queue.held(), 5u);
  auto a = queue.next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first.line, 1u);
  auto e = queue.next();  // B, C, D wait for A; E shares nothing
  ASSERT_TRUE(e);
  EXPECT_EQ(e->first.line, 5u);
  EXPECT_FALSE(queue.next());
  EXPECT_TRUE(queue.wants_window());  // the waiting ones do not hold up reading more input
  queue.started(e->second);
  EXPECT_FALSE(queue.next());
  queue.started(a->second);
  std::vector<uint64_t> released;
  while (auto r = queue.next()) {
    released.push_back(r->first.line);
    queue.started(r->second);
  }
  EXPECT_EQ(released, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(queue.held(), 0u);
}

TEST(SubmissionQueue, InputOrderRunsInFileOrderWithoutWaiting) {
  SubmissionQueue queue(BatchOrder::kInput, 2);
  queue.add_window(window());
  std::vector<uint64_t> lines;
  while (auto r = queue.next()) lines.push_back(r->first.line);
  EXPECT_EQ(lines, (std::vector<uint64_t>{5, 3, 1, 4, 2}));
}

}  // namespace
}  // namespace rapide::batch
