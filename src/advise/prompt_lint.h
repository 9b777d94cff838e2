// The prompt lint (`rapide advise --prompts requests.jsonl [--fix OUT]`): finds what keeps a
// request log from hitting the prefix cache although its prompts look alike, and estimates
// the hit rate the traffic would reach with it fixed.
//
// Found, per prompt (each message's content for chat requests):
//   dynamic content early  a timestamp, identifier or counter (advise/dynamic_text.h) on a
//                          line before the prompt's last line, or anywhere before text the
//                          prompt shares with an earlier one: everything after it is
//                          computed again for every request
//   key order              an embedded JSON object whose keys come in another order than
//                          the same object's (the same keys) in another request
//   whitespace / Unicode   runs of spaces, CRLF, trailing spaces, non-breaking or zero-width
//                          spaces, text not in NFC: the same text spelled differently
//   variable text in the middle  a prompt equal to an earlier one except for a value in the
//                          middle (a name, a sentence), with much shared text after it
// The last three rules, and the inline form of the first, compare each prompt with the
// earlier prompt it shares the longest start with: after the first difference the two must
// agree again (kv/near_miss.h on characters), and the values that differ are shown.
// The fix (canonicalise): lines with dynamic values move to the end of their message, JSON
// objects are rewritten with sorted keys, whitespace is normalised. The hit rates replay the
// prompts in order through the prefix cache's block hashing (engine/prefix_sharing.h) on the
// model's tokens: what an unbounded cache would serve before and after the fix.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rapide::advise {

struct LintIssue {
  std::string kind;     // "dynamic content early", "key order", "whitespace/Unicode",
                        // "variable text in the middle"
  int requests = 0;     // requests showing it
  std::string example;  // the first one: the value and where
  // The first pair of differing values found by comparing two prompts (empty when the
  // issue was found in one prompt alone), and how far into the prompt they sit.
  std::string value, other_value;
  size_t offset = 0;
};

struct LintReport {
  int requests = 0;
  std::vector<LintIssue> issues;  // kinds found, in the order above
  double hit_rate_now = 0.0;      // prompt tokens an ideal prefix cache serves
  double hit_rate_fixed = 0.0;    // the same after canonicalising
};

using Encode = std::function<std::vector<int32_t>(const std::string&)>;

// Two prompts compared (see above): the first difference, whether the texts agree again
// after it, and the values.
struct PromptDifference {
  bool near = false;  // they agree again after the difference
  size_t offset = 0;  // characters before the difference
  size_t after = 0;   // characters of the first text after it
  std::string value, other_value;
  std::string kind;  // one of the LintIssue kinds
};
PromptDifference compare_prompts(const std::string& text, const std::string& earlier);

// One canonical form of a text: JSON objects with sorted keys, whitespace normalised,
// lines carrying dynamic values moved to the end.
std::string canonicalize_text(const std::string& text);

// `requests`: JSONL objects with "prompt" or "messages" (the bench/batch format).
LintReport lint_prompts(const std::vector<nlohmann::json>& requests, const Encode& encode,
                        int block_size);
// The requests with every prompt canonicalised (other fields unchanged).
std::vector<nlohmann::json> fix_prompts(const std::vector<nlohmann::json>& requests);

std::string format_lint(const LintReport& report);
nlohmann::json lint_to_json(const LintReport& report);

// Reads a JSONL request log; Error(kInvalidArgument) naming the line for anything else.
std::vector<nlohmann::json> read_requests(const std::string& path);
void write_requests(const std::string& path, const std::vector<nlohmann::json>& requests);

}  // namespace rapide::advise
