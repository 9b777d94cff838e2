// Paths of the shared test assets, overridable with RAPIDE_SHARED_DIR at run time, and the one
// rule for a test whose prerequisite is absent (shared data, an oracle tool):
//   * in CI (the environment has CI set, as `.ci/run` runs with CI=true) the test FAILS, so a
//     lost ../shared or a broken install can never turn the suite green by skipping;
//   * elsewhere it skips, printing "SKIPPED <test>: <what is missing>" to stderr as well as to
//     gtest, so the gap shows in ctest's output and not only in its skipped count.
// Use RAPIDE_REQUIRE_SHARED(relative) at the top of a test body or SetUp, and
// RAPIDE_MISSING_PREREQUISITE(reason) for other prerequisites. tests/require_shared.py is the
// same rule for the Python and shell tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rapide::testing {

inline std::string shared_dir() {
  const char* env = std::getenv("RAPIDE_SHARED_DIR");
  return env ? env : RAPIDE_SHARED_DIR;
}
inline std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }
inline std::string test_data_path(const std::string& relative) {
  return std::string(RAPIDE_TEST_DATA_DIR) + "/" + relative;
}
inline std::string rapide_binary() { return RAPIDE_BINARY; }

// True when CI is set to anything but "", "0" or "false".
inline bool running_in_ci() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v = ci;
  return !v.empty() && v != "0" && v != "false";
}

// Empty when shared/<relative> exists; otherwise what is missing, for the messages below.
inline std::string missing_shared(const std::string& relative) {
  const std::string path = shared_path(relative);
  if (std::filesystem::exists(path)) return "";
  return "shared test data missing: " + path +
         " (RAPIDE_SHARED_DIR or ../shared next to the checkout)";
}

inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : "(no test)";
}

}  // namespace rapide::testing

// Fails under CI, skips loudly elsewhere; returns from the enclosing void function.
#define RAPIDE_MISSING_PREREQUISITE(reason)                                               \
  do {                                                                                    \
    const std::string rapide_reason_ = (reason);                                          \
    if (::rapide::testing::running_in_ci()) {                                             \
      FAIL() << rapide_reason_ << " [CI is set: a missing prerequisite fails the test]";  \
    }                                                                                     \
    std::fprintf(stderr, "SKIPPED %s: %s (with CI=true this fails)\n",                    \
                 ::rapide::testing::current_test_name().c_str(), rapide_reason_.c_str()); \
    GTEST_SKIP() << rapide_reason_;                                                       \
  } while (0)

// Applies the rule above when shared/<relative> does not exist.
#define RAPIDE_REQUIRE_SHARED(relative)                                              \
  do {                                                                               \
    const std::string rapide_missing_ = ::rapide::testing::missing_shared(relative); \
    if (!rapide_missing_.empty()) RAPIDE_MISSING_PREREQUISITE(rapide_missing_);      \
  } while (0)
