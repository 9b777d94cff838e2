// Test helpers: whether a grammar accepts a text in full or as a prefix, and the check of a
// grammar against the sentences it must accept and those it must reject.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>

#include "grammar/matcher.h"

namespace rapide::grammar {

// Whether `text` is a complete sentence of `g`.
inline bool matches(const Grammar& g, std::string_view text) {
  Matcher m(g);
  MatchState s = m.initial();
  return m.advance(s, text) && s.accepts;
}

// Whether `text` is a prefix of some sentence.
inline bool viable(const Grammar& g, std::string_view text) {
  Matcher m(g);
  MatchState s = m.initial();
  return m.advance(s, text);
}

inline void expect_language(const Grammar& g, std::initializer_list<std::string_view> accepted,
                            std::initializer_list<std::string_view> rejected) {
  for (const std::string_view text : accepted) EXPECT_TRUE(matches(g, text)) << text;
  for (const std::string_view text : rejected) EXPECT_FALSE(matches(g, text)) << text;
}

}  // namespace rapide::grammar
