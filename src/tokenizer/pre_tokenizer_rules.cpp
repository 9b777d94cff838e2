#include "tokenizer/pre_tokenizer_rules.h"

#include <initializer_list>

#include "base/error.h"

namespace rapide {
namespace {

// GPT-2's encoder.py pattern as llama.cpp spells it: without a final "|\s+", so a lone
// whitespace character before a word (e.g. "\n" before "a") is left unmatched and becomes a
// piece of its own, which is what the trailing \s+ would have produced anyway.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

// Llama 3's tokenizer.json pattern spells the contractions (?i:'s|...); llama.cpp (and we)
// use explicit classes, because Unicode case folding would also accept "ſ" (U+017F) and the
// Kelvin sign for s and k.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: Llama 3's pattern with digits one by one.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek's CJK run (CJK ideographs up to U+9FA5, U+0800..U+4E00 and Hangul syllables
// through U+D7FF), shared by deepseek-llm and deepseek-coder.
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// deepseek-llm's letters: the cased letters (Lu, Ll, Lt) its tokenizer.json enumerates,
// range by range, as code points (its list stops at U+A78E, so later cased letters such as
// U+A790 are not letters here).
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";

// deepseek-llm's punctuation: ASCII ! to / and : to ~ (which includes the ASCII letters, but
// those were already cut into words of their own), their full-width forms, the quotation
// marks U+2018..U+201F and U+3000..U+3002 (ideographic space, comma, full stop).
constexpr const char* kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";

PreTokenizerRules gpt2() {
  return {"gpt-2", {kGpt2}, false};
}

// Unicode's White_Space characters, what llama.cpp's \s stands for (its own tables; it maps
// non-ASCII whitespace to \v before std::regex runs). PCRE2's \s under UCP also takes U+180E
// (Mongolian vowel separator, White_Space only before Unicode 6.3), so we spell \s out.
constexpr std::string_view kWhiteSpace =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F})"
    R"(\x{3000})";

// `pattern` with \s and \S replaced by explicit classes of kWhiteSpace (inside a class, \s
// adds the ranges; none of our patterns has \S inside a class or nests classes).
std::string spell_white_space(std::string_view pattern) {
  const std::string white_space(kWhiteSpace);
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? white_space : "[" + white_space + "]";
      } else if (escaped == 'S' && !in_class) {
        out += "[^" + white_space + "]";
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    if (c == '[') in_class = true;
    if (c == ']') in_class = false;
    out += c;
  }
  return out;
}

PreTokenizerRules rules_of(std::string_view pre);

}  // namespace

PreTokenizerRules pre_tokenizer_rules(std::string_view pre) {
  PreTokenizerRules rules = rules_of(pre);
  for (std::string& regex : rules.regexes) regex = spell_white_space(regex);
  return rules;
}

namespace {

PreTokenizerRules rules_of(std::string_view pre) {
  // Name lists as llama.cpp's llama_vocab::load reads tokenizer.ggml.pre.
  const auto any = [pre](std::initializer_list<std::string_view> names) {
    for (const std::string_view name : names) {
      if (pre == name) return true;
    }
    return false;
  };
  if (pre.empty() || pre == "default") {
    // llama.cpp's fallback: punctuation runs (and $+<=>^~|) first, then GPT-2's rules, then
    // digit runs cut off and split into groups of three ASCII digits ("3333" -> "333" "3").
    return {
        "default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}, false};
  }
  if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
           "lfm2"})) {
    return {"llama3", {kLlama3}, true};
  }
  if (any({"dbrx", "smaug-bpe"})) return {"dbrx", {kLlama3}, false};
  if (any({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"})) {
    return {"qwen2", {kQwen2}, false};
  }
  if (pre == "deepseek-llm") {
    return {
        "deepseek-llm",
        {R"([\r\n])", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"},
        false};
  }
  if (pre == "deepseek-coder") {
    return {"deepseek-coder",
            {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"},
            false};
  }
  if (pre == "falcon") {
    // Like the default but with the backtick among the isolated symbols and no separate
    // digit-run step: GPT-2's " ?\p{N}+" keeps a space before a number.
    return {"falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}, false};
  }
  if (any({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    // Every digit alone first, then GPT-2's rules within what is left.
    return {"starcoder", {R"(\p{N})", kGpt2}, false};
  }
  if (any({"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion", "jina-es", "jina-de",
           "jina-v2-es", "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe", "gigachat",
           "a.x-4.0", "mellum"})) {
    return gpt2();
  }
  fail(ErrorCode::kUnsupported,
       "tokenizer: unknown pre-tokenizer '{}' (tokenizer.ggml.pre; supported: default, gpt-2, "
       "mpt, llama3/llama-bpe, qwen2, deepseek-llm, deepseek-coder, falcon, starcoder, refact, "
       "command-r, dbrx and their aliases)",
       pre);
}

}  // namespace
}  // namespace rapide
