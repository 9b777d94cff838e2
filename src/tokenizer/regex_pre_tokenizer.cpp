#include "tokenizer/regex_pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace rapide {
namespace {

// GPT-2's pattern (encoder.py), the one tokenizer.json files of GPT-2 descendants carry.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3 and Qwen2 spell the contractions case-insensitively. Written with explicit classes
// (as llama.cpp does) rather than (?i:...), because PCRE2's Unicode case folding would also
// accept "ſ" (U+017F) and the Kelvin sign for s and k.
constexpr const char* kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: like Llama 3 but digits are split one by one.
constexpr const char* kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

struct RegexPreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

RegexPreTokenizer::RegexPreTokenizer(std::string_view pre)
    : compiled_(std::make_unique<Compiled>()) {
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") {
    pattern_ = kGpt2Pattern;
  } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3") {
    pattern_ = kLlama3Pattern;
    ignore_merges_ = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    pattern_ = kQwen2Pattern;
  } else {
    fail(ErrorCode::kUnsupported,
         "tokenizer: unsupported pre-tokenizer '{}' (supported: default, gpt2, gpt-2, llama3, "
         "llama-bpe, llama-v3, qwen2, deepseek-r1-qwen)",
         pre);
  }
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // MATCH_INVALID_UTF: arbitrary bytes must tokenize (byte-level BPE covers every byte), so
  // invalid UTF-8 may not make matching fail; such bytes just never match.
  compiled_->code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern_.c_str()), PCRE2_ZERO_TERMINATED,
      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(ErrorCode::kInternal, "tokenizer: pre-tokenizer regex does not compile at {}: {}",
         error_offset, reinterpret_cast<const char*>(message));
  }
  // JIT is an optimization only: builds of PCRE2 without it still match, just slower.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexPreTokenizer::~RegexPreTokenizer() = default;

std::vector<std::string_view> RegexPreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  // Per call (not per tokenizer) so concurrent encodes never share match state.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  // The default 32 KiB JIT stack could overflow on long runs of backtracking; grow on demand.
  std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(
      compiled_->jit ? pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr) : nullptr,
      &pcre2_jit_stack_free);
  if (!match || !context) fail(ErrorCode::kResourceExhausted, "tokenizer: out of memory");
  if (stack) pcre2_jit_stack_assign(context.get(), nullptr, stack.get());

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t emitted = 0;  // end of the last word pushed
  size_t position = 0;
  while (position < text.size()) {
    const int rc =
        pcre2_match(compiled_->code, subject, text.size(), position, 0, match.get(), context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail(ErrorCode::kInternal, "tokenizer: pre-tokenizer match failed: {}",
           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match.get());
    const size_t start = range[0], end = range[1];
    if (start > emitted) words.push_back(text.substr(emitted, start - emitted));
    if (end == start) {  // none of our patterns matches empty; guard against looping anyway
      emitted = start;
      position = start + 1;
      continue;
    }
    words.push_back(text.substr(start, end - start));
    emitted = position = end;
  }
  if (emitted < text.size()) words.push_back(text.substr(emitted));
  return words;
}

}  // namespace rapide
