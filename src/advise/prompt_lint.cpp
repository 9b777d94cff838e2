#include "advise/prompt_lint.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "advise/dynamic_text.h"
#include "advise/unicode_nfc.h"
#include "base/error.h"
#include "engine/prefix_sharing.h"

namespace rapide::advise {

namespace {

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

LintReport lint_prompts(const std::vector<nlohmann::json>& requests, const Encode& encode,
                        int block_size) {
  LintReport report;
  report.requests = static_cast<int>(requests.size());
  LintIssue dynamic{"dynamic content early", 0, {}};
  LintIssue order{"key order", 0, {}};
  LintIssue space{"whitespace/Unicode", 0, {}};
  for (const nlohmann::json& request : requests) {
    nlohmann::json copy = request;
    bool has_dynamic = false, has_order = false, has_space = false;
    for (std::string* text : texts_of(copy)) {
      std::string value;
      move_dynamic_lines(*text, &value);
      if (!value.empty()) {
        has_dynamic = true;
        if (dynamic.example.empty()) {
          dynamic.example =
              fmt::format("`{}` ({}) {} characters in, before {} more characters", value,
                          dynamic_kind_name(classify_difference("", value, "")), text->find(value),
                          text->size() - text->find(value));
        }
      }
      bool unsorted = false;
      sort_json_objects(*text, &unsorted);
      if (unsorted) {
        has_order = true;
        if (order.example.empty()) {
          order.example = fmt::format("`{}`", text->substr(text->find('{'), 60));
        }
      }
      if (normalize_whitespace(*text) != *text) {
        has_space = true;
        if (space.example.empty()) {
          space.example = to_nfc(*text) != *text
                              ? "decomposed Unicode (e.g. e + U+0301 for é): not in NFC"
                              : "runs of spaces, CRLF or non-breaking spaces";
        }
      }
    }
    dynamic.requests += has_dynamic;
    order.requests += has_order;
    space.requests += has_space;
  }
  for (LintIssue* issue : {&dynamic, &order, &space}) {
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
    issues.push_back({{"kind", i.kind}, {"requests", i.requests}, {"example", i.example}});
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
