#include "advise/prompt_lint.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "advise/dynamic_text.h"
#include "advise/unicode_nfc.h"
#include "base/error.h"
#include "engine/prefix_sharing.h"
#include "kv/near_miss.h"

namespace rapide::advise {

namespace {

// compare_prompts: shared characters after a difference that make it worth reporting, how
// far each side is compared, and how much of a value that did not realign is shown.
constexpr size_t kSharedAfter = 128;
constexpr size_t kCompareCharacters = 4096;
constexpr size_t kShownCharacters = 40;
// lint_prompts compares each prompt with the earlier ones (at most this many back) that share
// the longest start with it: the ones a prefix cache would match it against.
constexpr size_t kComparedPrompts = 16;

const std::regex& dynamic_value() {
  static const std::regex re(
      R"(\d{4}-\d{2}-\d{2}([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?Z?)?|\b\d{1,2}:\d{2}:\d{2}\b|)"
      R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})");
  return re;
}

// Every prompt text of a request: its "prompt", or each message's content.
std::vector<std::string*> texts_of(nlohmann::json& request) {
  std::vector<std::string*> out;
  if (request.contains("prompt") && request["prompt"].is_string()) {
    out.push_back(request["prompt"].get_ptr<std::string*>());
  } else if (request.contains("messages") && request["messages"].is_array()) {
    for (auto& m : request["messages"]) {
      if (m.is_object() && m.contains("content") && m["content"].is_string()) {
        out.push_back(m["content"].get_ptr<std::string*>());
      }
    }
  }
  return out;
}

std::string flatten(const nlohmann::json& request) {
  nlohmann::json copy = request;
  std::string out;
  for (const std::string* t : texts_of(copy)) out += *t + "\n";
  return out;
}

// Composes to Unicode NFC, then replaces non-breaking and zero-width spaces, CRLF, trailing
// spaces and runs of spaces.
std::string normalize_whitespace(const std::string& text) {
  std::string s = std::regex_replace(to_nfc(text), std::regex("\xC2\xA0|\xE2\x80\xAF"), " ");
  s = std::regex_replace(s, std::regex("\xE2\x80\x8B|\xEF\xBB\xBF"), "");
  s = std::regex_replace(s, std::regex("\r\n"), "\n");
  s = std::regex_replace(s, std::regex("[ \t]+\n"), "\n");
  s = std::regex_replace(s, std::regex("([^\n ]) {2,}"), "$1 ");
  return s;
}

// Rewrites each top-level JSON object embedded in the text with sorted keys (nlohmann's
// objects are sorted maps); `unsorted` tells whether any was not sorted before.
std::string sort_json_objects(const std::string& text, bool* unsorted) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '{') {
      out += text[i++];
      continue;
    }
    // The balanced span (strings honoured) starting here.
    int depth = 0;
    bool in_string = false;
    size_t j = i;
    for (; j < text.size(); ++j) {
      const char c = text[j];
      if (in_string) {
        if (c == '\\')
          ++j;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        depth++;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (j >= text.size()) {
      out += text[i++];
      continue;
    }
    const std::string span = text.substr(i, j - i + 1);
    const nlohmann::json parsed = nlohmann::json::parse(span, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      out += text[i++];
      continue;
    }
    const nlohmann::ordered_json original = nlohmann::ordered_json::parse(span);
    if (unsorted && original.dump() != parsed.dump()) *unsorted = true;
    out += parsed.dump();
    i = j + 1;
  }
  return out;
}

// The key order of a JSON value, nested objects included: "{a{x,y},b}".
void key_order(const nlohmann::ordered_json& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    for (auto it = j.begin(); it != j.end(); ++it) {
      out += it.key();
      key_order(it.value(), out);
      out += ',';
    }
    out += '}';
  } else if (j.is_array()) {
    for (const auto& e : j) key_order(e, out);
  }
}

// Each top-level JSON object embedded in the text: its keys in sorted order (which object
// it is, whatever its values) and in the order written.
std::vector<std::pair<std::string, std::string>> object_orders(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = text.find('{'); i != std::string::npos; i = text.find('{', i + 1)) {
    int depth = 0;
    bool in_string = false;
    size_t j = i;
    for (; j < text.size(); ++j) {
      const char c = text[j];
      if (in_string) {
        if (c == '\\')
          ++j;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        depth++;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    if (j >= text.size()) break;
    const std::string span = text.substr(i, j - i + 1);
    const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(span, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) continue;
    std::string sorted, written;
    key_order(nlohmann::ordered_json::parse(nlohmann::json::parse(span).dump()), sorted);
    key_order(parsed, written);
    out.emplace_back(std::move(sorted), std::move(written));
    i = j;
  }
  return out;
}

// Moves lines that carry a dynamic value (not the last line) to the end of the text.
std::string move_dynamic_lines(const std::string& text, std::string* found) {
  std::vector<std::string> lines, moved;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  std::vector<std::string> kept;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (i + 1 < lines.size() && std::regex_search(lines[i], m, dynamic_value())) {
      if (found && found->empty()) *found = m.str();
      moved.push_back(lines[i]);
    } else {
      kept.push_back(lines[i]);
    }
  }
  if (moved.empty()) return text;
  std::string out;
  for (const std::string& l : kept) out += l + "\n";
  for (size_t i = 0; i < moved.size(); ++i) out += moved[i] + (i + 1 < moved.size() ? "\n" : "");
  return out;
}

double replay(const std::vector<nlohmann::json>& requests, const Encode& encode, int block_size) {
  PrefixSharingProbe probe(block_size, 0);
  for (const nlohmann::json& r : requests) {
    const std::vector<int32_t> tokens = encode(flatten(r));
    probe.observe(tokens);
  }
  return probe.stats().shareable_fraction();
}

}  // namespace

std::string canonicalize_text(const std::string& text) {
  return move_dynamic_lines(sort_json_objects(normalize_whitespace(text), nullptr), nullptr);
}

PromptDifference compare_prompts(const std::string& text, const std::string& earlier) {
  PromptDifference d;
  size_t p = 0;
  while (p < text.size() && p < earlier.size() && text[p] == earlier[p]) ++p;
  // Not inside a UTF-8 sequence: a value starts at a character.
  while (p > 0 && p < text.size() && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  d.offset = p;
  d.after = text.size() - p;
  // Shared text after the difference is what the difference costs: without much of it on
  // both sides (a question at the end, or an earlier prompt that was short), the prompts
  // simply go on differently. A short earlier prompt let any 8-character run realign: two
  // unrelated prompts of random words were read as one prompt with a value in the middle.
  if (p >= text.size() || p >= earlier.size() || d.after < kSharedAfter ||
      earlier.size() - p < kSharedAfter) {
    return d;
  }
  const std::string_view a = std::string_view(text).substr(p, kCompareCharacters);
  const std::string_view b = std::string_view(earlier).substr(p, kCompareCharacters);
  const std::vector<int32_t> a_chars(a.begin(), a.end()), b_chars(b.begin(), b.end());
  const NearMiss near = compare_after_divergence(a_chars, b_chars);
  if (!near.near) return d;
  d.near = true;
  const std::string_view before = std::string_view(text).substr(0, p);
  const DifferingValues v = near.realigned
                                ? widen_values(before, a, static_cast<size_t>(near.prompt_differs),
                                               b, static_cast<size_t>(near.cached_differs))
                                : widen_values(before, a, kShownCharacters, b, kShownCharacters);
  d.value = v.a;
  d.other_value = v.b;
  DynamicKind kind =
      classify_difference(before.substr(before.size() - std::min<size_t>(before.size(), 64)),
                          a.substr(0, 256), b.substr(0, 256));
  // A value inserted on one side only (an id in front of a system prompt) is classified by
  // what was inserted.
  if (near.realigned && kind == DynamicKind::kText) {
    for (const std::string* value : {&v.a, &v.b}) {
      const DynamicKind k = classify_difference("", *value, "");
      if (k == DynamicKind::kTimestamp || k == DynamicKind::kIdentifier) kind = k;
    }
  }
  // The same text spelled differently: equal once normalised, with a little of the shared
  // text on both sides (runs of spaces and CRLF are seen with their neighbours).
  const auto spelled = [&](std::string_view side, int differs) {
    const std::string_view lead = before.substr(before.size() - std::min<size_t>(before.size(), 8));
    return normalize_whitespace(std::string(lead) +
                                std::string(side.substr(0, static_cast<size_t>(differs) + 8)));
  };
  if (kind == DynamicKind::kWhitespace ||
      (near.realigned && spelled(a, near.prompt_differs) == spelled(b, near.cached_differs))) {
    d.kind = "whitespace/Unicode";
  } else if (kind == DynamicKind::kKeyOrder) {
    d.kind = "key order";
  } else if (kind == DynamicKind::kText) {
    d.kind = "variable text in the middle";
  } else {
    d.kind = "dynamic content early";
  }
  return d;
}

LintReport lint_prompts(const std::vector<nlohmann::json>& requests, const Encode& encode,
                        int block_size) {
  LintReport report;
  report.requests = static_cast<int>(requests.size());
  LintIssue dynamic{"dynamic content early", 0, {}, {}, {}, 0};
  LintIssue order{"key order", 0, {}, {}, {}, 0};
  LintIssue space{"whitespace/Unicode", 0, {}, {}, {}, 0};
  LintIssue middle{"variable text in the middle", 0, {}, {}, {}, 0};
  const auto issue_of = [&](const std::string& kind) -> LintIssue& {
    return kind == "key order"               ? order
           : kind == "whitespace/Unicode"    ? space
           : kind == "dynamic content early" ? dynamic
                                             : middle;
  };
  // Key order counts only where one object (the same keys) is written in several orders.
  std::map<std::string, std::set<std::string>> orders;
  std::vector<std::string> flat;
  for (const nlohmann::json& request : requests) {
    flat.push_back(flatten(request));
    for (const auto& [sorted, written] : object_orders(flat.back())) orders[sorted].insert(written);
  }
  for (size_t n = 0; n < requests.size(); ++n) {
    nlohmann::json copy = requests[n];
    std::set<std::string> kinds;
    for (std::string* text : texts_of(copy)) {
      std::string value;
      move_dynamic_lines(*text, &value);
      if (!value.empty()) {
        kinds.insert(dynamic.kind);
        if (dynamic.example.empty()) {
          dynamic.example =
              fmt::format("`{}` ({}) {} characters in, before {} more characters", value,
                          dynamic_kind_name(classify_difference("", value, "")), text->find(value),
                          text->size() - text->find(value));
        }
      }
      for (const auto& [sorted, written] : object_orders(*text)) {
        if (orders[sorted].size() < 2) continue;
        kinds.insert(order.kind);
        if (order.example.empty()) {
          order.example = fmt::format("`{}`", show_value(text->substr(text->find('{'), 60)));
        }
      }
      if (normalize_whitespace(*text) != *text) {
        kinds.insert(space.kind);
        if (space.example.empty()) {
          space.example = to_nfc(*text) != *text
                              ? "decomposed Unicode (e.g. e + U+0301 for é): not in NFC"
                              : "runs of spaces, CRLF or non-breaking spaces";
        }
      }
    }
    // Against the earlier prompts it shares the longest start with.
    std::vector<size_t> earlier;
    for (size_t m = n > kComparedPrompts ? n - kComparedPrompts : 0; m < n; ++m)
      earlier.push_back(m);
    const auto common = [&](size_t m) {
      return static_cast<size_t>(
          std::mismatch(flat[n].begin(), flat[n].end(), flat[m].begin(), flat[m].end()).first -
          flat[n].begin());
    };
    std::stable_sort(earlier.begin(), earlier.end(),
                     [&](size_t x, size_t y) { return common(x) > common(y); });
    const size_t longest = earlier.empty() ? 0 : common(earlier.front());
    for (const size_t m : earlier) {
      if (common(m) < longest) break;
      const PromptDifference d = compare_prompts(flat[n], flat[m]);
      if (!d.near) continue;
      kinds.insert(d.kind);
      LintIssue& issue = issue_of(d.kind);
      if (issue.value.empty() && issue.other_value.empty()) {
        issue.value = d.value;
        issue.other_value = d.other_value;
        issue.offset = d.offset;
        const std::string pair =
            fmt::format("`{}` vs `{}` {} characters in, before {} more characters",
                        show_value(d.value), show_value(d.other_value), d.offset, d.after);
        issue.example = issue.example.empty() ? pair : issue.example + "; " + pair;
      }
      break;
    }
    for (const std::string& kind : kinds) issue_of(kind).requests++;
  }
  for (LintIssue* issue : {&dynamic, &order, &space, &middle}) {
    if (issue->requests > 0) report.issues.push_back(*issue);
  }
  report.hit_rate_now = replay(requests, encode, block_size);
  report.hit_rate_fixed = replay(fix_prompts(requests), encode, block_size);
  return report;
}

std::vector<nlohmann::json> fix_prompts(const std::vector<nlohmann::json>& requests) {
  std::vector<nlohmann::json> out = requests;
  for (nlohmann::json& r : out) {
    for (std::string* text : texts_of(r)) *text = canonicalize_text(*text);
  }
  return out;
}

std::string format_lint(const LintReport& report) {
  std::string out = fmt::format("prompt lint: {} requests\n", report.requests);
  if (report.issues.empty()) out += "  no cache-hostile pattern found\n";
  for (const LintIssue& i : report.issues) {
    out += fmt::format("  {}: {} requests; e.g. {}\n", i.kind, i.requests, i.example);
  }
  out += fmt::format(
      "  prefix-cache hit rate (replayed through block hashing): now {:.0f} %, fixed {:.0f} %\n",
      report.hit_rate_now * 100.0, report.hit_rate_fixed * 100.0);
  return out;
}

nlohmann::json lint_to_json(const LintReport& report) {
  nlohmann::json issues = nlohmann::json::array();
  for (const LintIssue& i : report.issues) {
    nlohmann::json issue = {{"kind", i.kind}, {"requests", i.requests}, {"example", i.example}};
    if (!i.value.empty() || !i.other_value.empty()) {
      issue["values"] = {i.value, i.other_value};
      issue["offset"] = i.offset;
    }
    issues.push_back(issue);
  }
  return {{"requests", report.requests},
          {"issues", issues},
          {"hit_rate_now", report.hit_rate_now},
          {"hit_rate_fixed", report.hit_rate_fixed}};
}

std::vector<nlohmann::json> read_requests(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kNotFound, "cannot open '{}'", path);
  std::vector<nlohmann::json> out;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json copy = j;
    if (j.is_discarded() || !j.is_object() || texts_of(copy).empty()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: not a JSON object with \"prompt\" or \"messages\"",
           path, line_no);
    }
    out.push_back(std::move(j));
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "{}: no requests", path);
  return out;
}

void write_requests(const std::string& path, const std::vector<nlohmann::json>& requests) {
  std::ofstream out(path);
  if (!out) fail(ErrorCode::kNotFound, "cannot write '{}'", path);
  for (const nlohmann::json& r : requests) out << r.dump() << '\n';
  if (!out) fail(ErrorCode::kInternal, "writing '{}' failed", path);
}

}  // namespace rapide::advise
