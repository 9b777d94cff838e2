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

}  // namespace
}  // namespace rapide
