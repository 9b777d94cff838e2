// The read-bandwidth probe's summary of its passes (kernels/bandwidth.h).
#include <gtest/gtest.h>

#include "base/thread_pool.h"
#include "kernels/bandwidth.h"

namespace rapide {
namespace {

TEST(ReadBandwidth, BestIsTheFastestPassAndTheMedianNoFaster) {
  ThreadPool pool(2);
  const ReadBandwidth r = measure_read_bandwidth_passes(pool, size_t{8} << 20, 5);
  EXPECT_GT(r.median, 0.0);
  EXPECT_GE(r.best, r.median);
}

TEST(ReadBandwidth, AtLeastOnePassIsTaken) {
  ThreadPool pool(1);
  const ReadBandwidth r = measure_read_bandwidth_passes(pool, size_t{1} << 20, 0);
  EXPECT_GT(r.best, 0.0);
  EXPECT_EQ(r.best, r.median);  // one pass: both are it
}

TEST(ReadBandwidth, ProbeInPiecesTouchesFirstThenTimesOnePassEach) {
  ThreadPool pool(2);
  ReadBandwidthProbe probe(size_t{4} << 20, 3);
  EXPECT_EQ(probe.result().best, 0.0);
  EXPECT_FALSE(probe.run_piece(pool));  // allocates and touches: nothing timed yet
  EXPECT_EQ(probe.result().best, 0.0);
  EXPECT_FALSE(probe.run_piece(pool));
  EXPECT_GT(probe.result().best, 0.0);
  EXPECT_FALSE(probe.run_piece(pool));
  EXPECT_TRUE(probe.run_piece(pool));  // the third pass
  EXPECT_TRUE(probe.run_piece(pool));  // over: does nothing
  EXPECT_GE(probe.result().best, probe.result().median);
}

}  // namespace
}  // namespace rapide
