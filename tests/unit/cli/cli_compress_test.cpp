// `rapide compress` through the real binary: the question is printed verbatim after the
// compressed context, the figures go to stderr, and bad arguments exit 2 with a message.
#include <gtest/gtest.h>

#include <cstdio>

#include "run_rapide.h"
#include "test_paths.h"
#include "unit/compress/story_context.h"

namespace rapide::testing {
namespace {

using namespace story_context;

TEST(CliCompress, PrintsTheCompressedContextThenTheQuestion) {
  RAPIDE_REQUIRE_SHARED(kServed);
  RAPIDE_REQUIRE_SHARED(kSmall);
  const std::string args = std::string("compress -m ") + shared_path(kServed) +
                           " --compressor-model " + shared_path(kSmall) +
                           " --ratio 0.5 --context " + shared_path(kText) + " --question '" +
                           kQuestion + "'";
  const CliResult out = run_rapide(args, /*keep_stderr=*/false);
  ASSERT_EQ(out.exit_code, 0) << out.out;
  EXPECT_TRUE(out.out.ends_with(std::string(kQuestion) + "\n")) << out.out;
  EXPECT_EQ(out.out.find("<context>"), std::string::npos);
  // Half the scorer's tokens: clearly shorter than the original text (3150 bytes).
  EXPECT_LT(out.out.size(), 2600u);
  EXPECT_GT(out.out.size(), 900u);
  const CliResult figures = run_rapide(args);  // stderr too
  EXPECT_NE(figures.out.find("compress: applied; passages 5 ->"), std::string::npos) << figures.out;
}

TEST(CliCompress, BadArgumentsExitTwoWithAMessage) {
  RAPIDE_REQUIRE_SHARED(kServed);
  const std::string model = shared_path(kServed);
  CliResult r = run_rapide("compress -m " + model + " --ratio 0 --question q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--ratio must be in (0, 1]"), std::string::npos) << r.out;
  const std::string unclosed = ::testing::TempDir() + "cli_compress_unclosed.txt";
  std::FILE* f = std::fopen(unclosed.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("<context>open", f);
  std::fclose(f);
  r = run_rapide("compress -m " + model + " --ratio 0.5 < " + unclosed);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("never closed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace rapide::testing
