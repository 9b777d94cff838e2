// API keys: which Authorization headers and key files are accepted.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "base/error.h"
#include "serve/auth.h"

namespace rapide::serve {
namespace {

TEST(ApiKeys, BearerOnlyWithAKnownKey) {
  const ApiKeys none;
  EXPECT_FALSE(none.enabled());
  const ApiKeys keys({"sk-one", " sk-two "}, "");
  EXPECT_TRUE(keys.enabled());
  EXPECT_TRUE(keys.accepts("Bearer sk-one"));
  EXPECT_TRUE(keys.accepts("Bearer sk-two"));
  EXPECT_FALSE(keys.accepts("Bearer sk-on"));
  EXPECT_FALSE(keys.accepts("Bearer sk-one1"));
  EXPECT_FALSE(keys.accepts("sk-one"));
  EXPECT_FALSE(keys.accepts("Basic sk-one"));
  EXPECT_FALSE(keys.accepts(""));
}

// RFC 7235: the scheme name is case-insensitive; some clients send "bearer".
TEST(ApiKeys, SchemeIsCaseInsensitive) {
  const ApiKeys keys({"sk-one"}, "");
  EXPECT_TRUE(keys.accepts("bearer sk-one"));
  EXPECT_TRUE(keys.accepts("BEARER sk-one"));
  EXPECT_FALSE(keys.accepts("bearer sk-One"));  // the key itself is exact
  EXPECT_FALSE(keys.accepts("bearers sk-one"));
}

// `--api-key "$UNSET"` must not silently turn authentication off.
TEST(ApiKeys, EmptyKeyIsRefused) {
  EXPECT_THROW(ApiKeys({""}, ""), Error);
  EXPECT_THROW(ApiKeys({"  "}, ""), Error);
  EXPECT_THROW(ApiKeys({"sk-one", ""}, ""), Error);
}

TEST(ApiKeys, KeyFileSkipsCommentsAndBlankLines) {
  const std::string path = ::testing::TempDir() + "/rapide_keys.txt";
  {
    std::ofstream out(path);
    out << "# keys\n\nsk-file\n";
  }
  const ApiKeys keys({}, path);
  EXPECT_TRUE(keys.accepts("Bearer sk-file"));
  EXPECT_FALSE(keys.accepts("Bearer # keys"));
  {
    std::ofstream out(path);
    out << "# nothing\n";
  }
  EXPECT_THROW(ApiKeys({}, path), Error);
  EXPECT_THROW(ApiKeys({}, path + ".missing"), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace rapide::serve
