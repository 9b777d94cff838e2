#include "loadgen/text_gen.h"

#include <array>
#include <string_view>
#include <vector>

namespace rapide::loadgen {

namespace {

constexpr std::array<std::string_view, 96> kWords = {
    "the",     "time",    "people",  "water",   "system",  "number",   "house",    "world",
    "school",  "river",   "market",  "garden",  "window",  "letter",   "story",    "city",
    "light",   "paper",   "music",   "night",   "morning", "answer",   "question", "friend",
    "family",  "country", "office",  "machine", "forest",  "mountain", "table",    "bridge",
    "simple",  "quick",   "bright",  "quiet",   "strong",  "early",    "green",    "small",
    "large",   "happy",   "careful", "little",  "modern",  "ancient",  "local",    "public",
    "run",     "read",    "write",   "build",   "find",    "carry",    "open",     "close",
    "follow",  "measure", "explain", "change",  "choose",  "return",   "travel",   "listen",
    "and",     "with",    "from",    "about",   "under",   "after",    "before",   "between",
    "because", "while",   "where",   "when",    "every",   "some",     "many",     "other",
    "model",   "token",   "server",  "memory",  "cache",   "batch",    "queue",    "thread",
    "engine",  "signal",  "report",  "method",  "result",  "record",   "detail",   "reason",
};

constexpr double kTokensPerWord = 1.3;

}  // namespace

TextGen::TextGen(uint64_t seed, TokenCounter counter) : rng_(seed), counter_(std::move(counter)) {}

std::string TextGen::words(int tokens) {
  if (tokens <= 0) return {};
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  const auto join = [](const std::vector<std::string_view>& list, size_t n) {
    std::string text;
    for (size_t i = 0; i < n; ++i) {
      if (i) text += ' ';
      text += list[i];
    }
    return text;
  };
  if (!counter_) {
    const size_t n = std::max<size_t>(1, static_cast<size_t>(tokens / kTokensPerWord + 0.5));
    std::vector<std::string_view> list;
    for (size_t i = 0; i < n; ++i) list.push_back(kWords[pick(rng_)]);
    return join(list, n);
  }
  // Every word costs at least one token, so `tokens` words always reach the target; the
  // smallest prefix of them that does is found by bisection (a few encodes per prompt).
  std::vector<std::string_view> list;
  for (int i = 0; i < tokens; ++i) list.push_back(kWords[pick(rng_)]);
  size_t lo = 1, hi = list.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (counter_(join(list, mid)) >= static_cast<size_t>(tokens)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return join(list, lo);
}

}  // namespace rapide::loadgen
