#include "tokenizer/regex_pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"
#include "tokenizer/pre_tokenizer_rules.h"

namespace rapide {

struct RegexPreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(error, message, sizeof(message));
  return reinterpret_cast<const char*>(message);
}

}  // namespace

RegexPreTokenizer::RegexPreTokenizer(std::string_view pre) {
  PreTokenizerRules rules = pre_tokenizer_rules(pre);
  family_ = std::move(rules.family);
  ignore_merges_ = rules.ignore_merges;
  for (const std::string& pattern : rules.regexes) {
    auto stage = std::make_unique<Compiled>();
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    // MATCH_INVALID_UTF: arbitrary bytes must tokenize (byte-level BPE covers every byte), so
    // invalid UTF-8 may not make matching fail; such bytes just never match. DOLLAR_ENDONLY:
    // "$" is the end of the word only, as in std::regex, never before a final newline.
    stage->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                      &error, &error_offset, nullptr);
    if (stage->code == nullptr) {
      fail(ErrorCode::kInternal, "tokenizer: pre-tokenizer regex '{}' does not compile at {}: {}",
           pattern, error_offset, pcre2_message(error));
    }
    // JIT is an optimization only: builds of PCRE2 without it still match, just slower.
    stage->jit = pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE) == 0;
    stages_.push_back(std::move(stage));
  }
}

RegexPreTokenizer::~RegexPreTokenizer() = default;

std::vector<std::string_view> RegexPreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  words.push_back(text);
  // Per call (not per tokenizer) so concurrent encodes never share match state.
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  // The default 32 KiB JIT stack could overflow on long runs of backtracking; grow on demand.
  std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(
      pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr), &pcre2_jit_stack_free);
  if (!context) fail(ErrorCode::kResourceExhausted, "tokenizer: out of memory");
  if (stack) pcre2_jit_stack_assign(context.get(), nullptr, stack.get());

  std::vector<std::string_view> next;
  for (const auto& stage : stages_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(stage->code, nullptr), &pcre2_match_data_free);
    if (!match) fail(ErrorCode::kResourceExhausted, "tokenizer: out of memory");
    next.clear();
    for (const std::string_view word : words) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(word.data());
      size_t emitted = 0;  // end of the last piece pushed
      size_t position = 0;
      while (position < word.size()) {
        const int rc =
            pcre2_match(stage->code, subject, word.size(), position, 0, match.get(), context.get());
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          fail(ErrorCode::kInternal, "tokenizer: pre-tokenizer match failed: {}",
               pcre2_message(rc));
        }
        const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
        const size_t start = range[0], end = range[1];
        if (end == start) {  // none of the rules matches empty; guard against looping anyway
          position = start + 1;
          continue;
        }
        if (start > emitted) next.push_back(word.substr(emitted, start - emitted));
        next.push_back(word.substr(start, end - start));
        emitted = position = end;
      }
      if (emitted < word.size()) next.push_back(word.substr(emitted));
    }
    words.swap(next);
  }
  return words;
}

}  // namespace rapide
