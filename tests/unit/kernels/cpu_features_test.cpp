// RAPIDE_ISA lowers the kernel level, never raises it: tests and benchmarks rely on it to
// run the scalar and AVX2 variants on an AVX-512 machine. The level is read once per
// process, so each case runs in a fresh child process (a "threadsafe" death test re-executes
// this binary) with the variable set, and reports the level as its exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "base/cpu_features.h"

namespace rapide {
namespace {

void expect_level(const char* value, IsaLevel expected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("RAPIDE_ISA", value, 1);
  EXPECT_EXIT(std::_Exit(static_cast<int>(active_isa_level())),
              ::testing::ExitedWithCode(static_cast<int>(expected)), "")
      << "RAPIDE_ISA=" << value << " should give " << isa_level_name(expected);
  ::unsetenv("RAPIDE_ISA");
}

TEST(CpuFeaturesDeathTest, RapideIsaLowersTheLevel) {
  const IsaLevel best = cpu_features().best_level();
  expect_level("scalar", IsaLevel::kScalar);
  expect_level("avx2", std::min(IsaLevel::kAvx2, best));
}

TEST(CpuFeaturesDeathTest, RapideIsaNeverRaisesTheLevel) {
  const IsaLevel best = cpu_features().best_level();
  expect_level("avx512", best);
  expect_level("no-such-isa", best);  // unknown names keep the best level
}

}  // namespace
}  // namespace rapide
