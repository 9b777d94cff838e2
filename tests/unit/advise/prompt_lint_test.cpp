#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "advise/prompt_lint.h"
#include "advise/unicode_nfc.h"
#include "loadgen/text_gen.h"

namespace rapide::advise {
namespace {

std::vector<int32_t> bytes(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

std::string system_prompt() {
  std::string s;
  for (int i = 0; i < 40; ++i)
    s += "Rule " + std::to_string(i) + ": answer briefly and politely.\n";
  return s;
}

TEST(PromptLint, TimestampFirstIsFoundAndFixingItRaisesTheHitRate) {
  std::vector<nlohmann::json> requests;
  for (int i = 0; i < 20; ++i) {
    const std::string time = "Time: 2026-11-29T10:04:" + std::to_string(10 + i) + "Z\n";
    requests.push_back({{"prompt", time + system_prompt() + "Question " + std::to_string(i)}});
  }
  const LintReport r = lint_prompts(requests, bytes, 16);
  ASSERT_EQ(r.issues.size(), 1u);
  EXPECT_EQ(r.issues[0].kind, "dynamic content early");
  EXPECT_EQ(r.issues[0].requests, 20);
  EXPECT_NE(r.issues[0].example.find("2026-11-29T10:04:10Z"), std::string::npos);
  EXPECT_LT(r.hit_rate_now, 0.05);   // the timestamp is in the first block
  EXPECT_GT(r.hit_rate_fixed, 0.8);  // 19 of 20 share the ~1,400-byte system prompt
  const std::vector<nlohmann::json> fixed = fix_prompts(requests);
  const std::string p = fixed[3]["prompt"];
  EXPECT_EQ(p.rfind("Time: 2026-11-29T10:04:13Z"), p.size() - 26) << p;
  EXPECT_EQ(p.find("Rule 0"), 0u);
}

TEST(PromptLint, VaryingKeyOrderAndWhitespaceAreCanonicalised) {
  std::vector<nlohmann::json> requests;
  for (int i = 0; i < 10; ++i) {
    const std::string tools = i % 2 ? R"({"name": "search", "args": {"q": 1, "k": 2}})"
                                    : R"({"args": {"q": 1, "k": 2}, "name": "search"})";
    const std::string spaces = i % 3 ? "Be  brief.\r\n" : "Be brief.\n";
    requests.push_back(
        {{"messages",
          {{{"role", "system"}, {"content", "Tools: " + tools + "\n" + spaces + system_prompt()}},
           {{"role", "user"}, {"content", fmt::format("q{}", i)}}}},
         {"max_tokens", 8}});
  }
  const LintReport r = lint_prompts(requests, bytes, 16);
  ASSERT_EQ(r.issues.size(), 2u) << format_lint(r);
  EXPECT_EQ(r.issues[0].kind, "key order");
  EXPECT_EQ(r.issues[0].requests, 10);  // both orders are unsorted at some level
  EXPECT_EQ(r.issues[1].kind, "whitespace/Unicode");
  EXPECT_GT(r.hit_rate_fixed, r.hit_rate_now + 0.2);
  const std::vector<nlohmann::json> fixed = fix_prompts(requests);
  EXPECT_EQ(fixed[0]["messages"][0]["content"], fixed[1]["messages"][0]["content"]);
  EXPECT_EQ(fixed[0]["max_tokens"], 8);
  EXPECT_EQ(canonicalize_text(R"(x {"b": 1, "a": [1, 2]} y)"), R"(x {"a":[1,2],"b":1} y)");
}

// The same visible text as composed (U+00E9) and decomposed (e + U+0301) bytes: block
// hashes differ until the lint's fix composes both to NFC.
TEST(PromptLint, UnicodeNormalisationDifferencesAreFoundAndComposed) {
  const std::string composed = "Caf\xC3\xA9 r\xC3\xA9sum\xC3\xA9. ";
  const std::string decomposed = "Cafe\xCC\x81 re\xCC\x81sume\xCC\x81. ";
  EXPECT_EQ(to_nfc(decomposed), composed);
  EXPECT_EQ(to_nfc(composed), composed);
  EXPECT_EQ(to_nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(to_nfc("bad \xFF utf-8"), "bad \xFF utf-8");  // left alone, not mangled
  // Request i writes the k-th "é" decomposed when bit k of i is set: ten byte-distinct
  // prompts that read the same.
  std::vector<nlohmann::json> requests;
  for (int i = 0; i < 10; ++i) {
    std::string text;
    for (int k = 0; k < 4; ++k) text += (i >> k & 1) ? "Cafe\xCC\x81 " : "Caf\xC3\xA9 ";
    requests.push_back({{"prompt", text + system_prompt() + std::to_string(i)}});
  }
  const LintReport r = lint_prompts(requests, bytes, 16);
  ASSERT_EQ(r.issues.size(), 1u);
  EXPECT_EQ(r.issues[0].kind, "whitespace/Unicode");
  EXPECT_EQ(r.issues[0].requests, 9);  // all but request 0
  EXPECT_NE(r.issues[0].example.find("NFC"), std::string::npos) << r.issues[0].example;
  EXPECT_LT(r.hit_rate_now, 0.1);    // every prompt differs in its first block
  EXPECT_GT(r.hit_rate_fixed, 0.8);  // 9 of 10 share the composed text and system prompt
  const std::vector<nlohmann::json> fixed = fix_prompts(requests);
  EXPECT_EQ(fixed[7]["prompt"].get<std::string>().substr(0, 4 * 6),
            "Caf\xC3\xA9 Caf\xC3\xA9 Caf\xC3\xA9 Caf\xC3\xA9 ");
}

// Rules that compare prompts: a value inline (no line of its own), a name in the middle,
// each shown as the two values that differ; a JSON object always written in one (unsorted)
// order is no key-order problem, and a question at the end is no difference at all.
TEST(PromptLint, ComparingPromptsShowsTheTwoValues) {
  const char* ids[] = {"3f2a9c1e-77b0-4c1d-9a4e-0c7d1b2e3f40",
                       "a1b2c3d4-0000-4c1d-9a4e-0c7d1b2e3f41",
                       "00ff00ff-1234-4c1d-9a4e-0c7d1b2e3f42"};
  const char* names[] = {"Alice Smith", "Bob Jones", "Carol White"};
  std::vector<nlohmann::json> requests;
  for (int i = 0; i < 3; ++i) {
    requests.push_back({{"prompt", std::string("[req ") + ids[i] + "] " + system_prompt() +
                                       "Question " + std::to_string(i)}});
  }
  const LintReport r = lint_prompts(requests, bytes, 16);
  ASSERT_EQ(r.issues.size(), 1u) << format_lint(r);
  EXPECT_EQ(r.issues[0].kind, "dynamic content early");
  EXPECT_EQ(r.issues[0].requests, 3);  // on a line of its own before the rest, too
  EXPECT_EQ(r.issues[0].value, ids[1]);
  EXPECT_EQ(r.issues[0].other_value, ids[0]);
  requests.clear();
  for (int i = 0; i < 3; ++i) {
    requests.push_back({{"prompt", system_prompt() + "Customer: " + names[i] + ". " +
                                       system_prompt() + "Question " + std::to_string(i)}});
  }
  const LintReport m = lint_prompts(requests, bytes, 16);
  ASSERT_EQ(m.issues.size(), 1u) << format_lint(m);
  EXPECT_EQ(m.issues[0].kind, "variable text in the middle");
  EXPECT_EQ(m.issues[0].requests, 2);
  // Whole words, not the shared `Customer: ` in front of them.
  EXPECT_EQ(m.issues[0].value, "Bob Jones") << m.issues[0].example;
  EXPECT_EQ(m.issues[0].other_value, "Alice Smith");

  // One order, always the same, unsorted: the cache sees identical prompts.
  std::vector<nlohmann::json> stable;
  for (int i = 0; i < 4; ++i) {
    stable.push_back({{"prompt", std::string(R"(Tool: {"name": "search", "args": 1})") + "\n" +
                                     system_prompt() + "Question " + std::to_string(i)}});
  }
  EXPECT_TRUE(lint_prompts(stable, bytes, 16).issues.empty())
      << format_lint(lint_prompts(stable, bytes, 16));
}

// Unrelated prompts written from one small vocabulary (as `rapide bench --workload random`
// writes them) share most 8-character grams after their first difference; that is no value in
// the middle of a shared prompt. The advisor had read 2 of 24 such prompts as a near miss and
// put the prefix cache above the workload's real bottleneck.
TEST(PromptLint, UnrelatedPromptsFromOneVocabularyAreNoNearMiss) {
  // The load generator's own random text, the prompts of the run that misled the advisor.
  for (const uint64_t seed : {1u, 2u, 3u, 7u}) {
    loadgen::TextGen text(seed, nullptr);
    std::vector<nlohmann::json> requests;
    for (int i = 0; i < 24; ++i) requests.push_back({{"prompt", text.words(i % 3 ? 8 : 400)}});
    const LintReport r = lint_prompts(requests, bytes, 16);
    EXPECT_TRUE(r.issues.empty()) << "seed " << seed << ": " << format_lint(r);
  }
}

TEST(PromptLint, CleanTrafficHasNoIssues) {
  std::vector<nlohmann::json> requests;
  for (int i = 0; i < 5; ++i) requests.push_back({{"prompt", system_prompt() + std::to_string(i)}});
  const LintReport r = lint_prompts(requests, bytes, 16);
  EXPECT_TRUE(r.issues.empty());
  EXPECT_NEAR(r.hit_rate_now, r.hit_rate_fixed, 1e-9);
  EXPECT_NE(format_lint(r).find("no cache-hostile pattern"), std::string::npos);
}

}  // namespace
}  // namespace rapide::advise
