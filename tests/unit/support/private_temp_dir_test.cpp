// tests/private_temp_dir.cpp: a test's temporary files, and those of the processes it starts,
// go to a directory of this process's own (removed after the last test; the script test
// temp_hygiene checks that from outside). Issue 53: test runs left files in /tmp.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace rapide::testing {
namespace {

namespace fs = std::filesystem;

TEST(PrivateTempDir, TempFilesGoToADirectoryOfThisProcess) {
  const fs::path dir = fs::temp_directory_path();
  EXPECT_EQ(dir.filename().string().rfind("rapide-test-", 0), 0u) << dir;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  // gtest's own helper agrees, so ::testing::TempDir() + "name" lands there too.
  EXPECT_TRUE(fs::equivalent(::testing::TempDir(), dir)) << ::testing::TempDir();
  // A process the test starts inherits it.
  FILE* pipe = ::popen("printenv TMPDIR", "r");
  ASSERT_NE(pipe, nullptr);
  char line[4096] = {};
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  ::pclose(pipe);
  ASSERT_TRUE(read);
  std::string child(line);
  while (!child.empty() && child.back() == '\n') child.pop_back();
  EXPECT_TRUE(fs::equivalent(child, dir)) << child;
}

}  // namespace
}  // namespace rapide::testing
