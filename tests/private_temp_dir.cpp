// Every test binary's temporary files go to a directory of its own, removed when the tests end.
//
// Compiled into each gtest binary (rapide_test_support). Before the first test, a fresh
// directory is made under the temporary directory the process was given ($TMPDIR, else /tmp)
// and TMPDIR and TEST_TMPDIR point at it, so ::testing::TempDir(),
// std::filesystem::temp_directory_path(), Python's tempfile and every process a test starts
// (rapide, python3, chromium) write there. After the last test it is removed with everything
// in it. Issue 53: a test run left bench_*.json, cli_*.txt, rapide-plain.toml and more in
// /tmp, because tests wrote fixed names straight into it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace rapide::testing {
namespace {

class PrivateTempDir final : public ::testing::Environment {
 public:
  void SetUp() override {
    saved_tmpdir_ = current("TMPDIR");
    saved_test_tmpdir_ = current("TEST_TMPDIR");
    std::string pattern = (std::filesystem::temp_directory_path() / "rapide-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      // Nowhere of our own to write: leave the environment as it is rather than fail every
      // test; files then land where they did before.
      return;
    }
    dir_ = pattern;
    ::setenv("TMPDIR", dir_.c_str(), 1);
    ::setenv("TEST_TMPDIR", dir_.c_str(), 1);
  }

  void TearDown() override {
    if (dir_.empty()) return;
    restore("TMPDIR", saved_tmpdir_);
    restore("TEST_TMPDIR", saved_test_tmpdir_);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }

 private:
  static std::optional<std::string> current(const char* name) {
    const char* value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  }
  static void restore(const char* name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }

  std::string dir_;
  std::optional<std::string> saved_tmpdir_, saved_test_tmpdir_;
};

// Registered before main() runs; gtest owns the environment.
[[maybe_unused]] ::testing::Environment* const kPrivateTempDir =
    ::testing::AddGlobalTestEnvironment(new PrivateTempDir);

}  // namespace
}  // namespace rapide::testing
