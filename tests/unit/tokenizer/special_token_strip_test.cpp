// Special tokens that swallow the whitespace next to them (HF added_tokens lstrip/rstrip,
// llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP/RSTRIP), and the attributes llama.cpp gives Phi-3
// GGUF files, which carry none, from their general.name.
#include <gtest/gtest.h>

#include "formats/hf_tokenizer.h"
#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::first_piece_id;
using testing::kSpace;
using testing::spm_vocab;
using Ids = std::vector<int32_t>;

const std::string kPhi3Prompt = "<|user|>\nHello<|end|>\n<|assistant|>\n";

// A Phi-3-like SentencePiece vocabulary: byte tokens, "▁Hello" (with the pieces its merges
// go through), and the chat tokens.
struct Phi3Vocab {
  TokenizerData data = spm_vocab({{std::string(kSpace) + "Hello", 0},
                                  {"<|user|>", 0},
                                  {"<|end|>", 0},
                                  {"<|assistant|>", 0},
                                  {"<|endoftext|>", 0},
                                  {std::string(kSpace) + "H", 0},
                                  {std::string(kSpace) + "He", 0},
                                  {std::string(kSpace) + "Hel", 0},
                                  {std::string(kSpace) + "Hell", 0}});
  int32_t hello = first_piece_id();
  int32_t user = hello + 1, end = hello + 2, assistant = hello + 3, endoftext = hello + 4;
  Phi3Vocab() {
    for (const int32_t id : {user, end, assistant, endoftext}) {
      data.types[id] = TokenType::kControl;
    }
  }
};

TEST(SpecialTokenStrip, Phi3FromTokenizerJsonAttributes) {
  // Phi-3's tokenizer.json gives its chat tokens rstrip: true. llama.cpp turns this prompt
  // into 32010 15043 32007 32001: <|user|> ▁Hello <|end|> <|assistant|>.
  Phi3Vocab v;
  v.data.strip.assign(v.data.tokens.size(), kStripNone);
  for (const int32_t id : {v.user, v.end, v.assistant}) v.data.strip[id] = kStripRight;
  const auto tokenizer = Tokenizer::create(v.data);
  EXPECT_EQ(tokenizer->encode(kPhi3Prompt, false, true),
            (Ids{v.user, v.hello, v.end, v.assistant}));
}

TEST(SpecialTokenStrip, WithoutAttributesTheNewlinesAreText) {
  Phi3Vocab v;
  v.data.model_name = "Llama";  // no name rule applies
  const auto tokenizer = Tokenizer::create(v.data);
  const Ids ids = tokenizer->encode(kPhi3Prompt, false, true);
  // "▁\n" (byte fallback: ▁ is three bytes, \n one) after each special token.
  EXPECT_GT(ids.size(), 4u);
  EXPECT_EQ(ids.front(), v.user);
}

TEST(SpecialTokenStrip, Phi3GgufGetsTheAttributesFromItsName) {
  // GGUF: no strip attributes in the file; llama.cpp sets rstrip on every special token of a
  // model whose general.name contains "phi-3" or "phi3" (case-insensitive), except <unk>,
  // <s> and <|endoftext|>.
  for (const std::string name : {"Phi-3-mini-4k-instruct", "phi3", "PHI3 test"}) {
    Phi3Vocab v;
    v.data.model_name = name;
    const auto tokenizer = Tokenizer::create(v.data);
    EXPECT_EQ(tokenizer->encode(kPhi3Prompt, false, true),
              (Ids{v.user, v.hello, v.end, v.assistant}))
        << name;
    const TokenizerData& d = tokenizer->data();
    EXPECT_EQ(d.strip[v.user], kStripRight);
    EXPECT_EQ(d.strip[2], kStripRight);  // </s>
    EXPECT_EQ(d.strip[0], kStripNone);   // <unk>
    EXPECT_EQ(d.strip[1], kStripNone);   // <s>
    EXPECT_EQ(d.strip[v.endoftext], kStripNone);
  }
}

TEST(SpecialTokenStrip, LeftStripAndOnlyAsciiWhitespace) {
  Phi3Vocab v;
  v.data.strip.assign(v.data.tokens.size(), kStripNone);
  v.data.strip[v.end] = kStripLeft;
  const auto tokenizer = Tokenizer::create(v.data);
  // " \t\n" before <|end|> goes; the text before it keeps its own space prefix.
  EXPECT_EQ(tokenizer->encode("Hello \t\n<|end|>", false, true), (Ids{v.hello, v.end}));
  // Nothing left of a fragment: no empty fragment, no lone "▁".
  EXPECT_EQ(tokenizer->encode("  <|end|>", false, true), (Ids{v.end}));
  // U+00A0 is no C isspace whitespace: it stays text (byte tokens C2 A0 after "▁").
  const Ids nbsp = tokenizer->encode("\xC2\xA0<|end|>", false, true);
  ASSERT_GE(nbsp.size(), 2u);
  EXPECT_EQ(nbsp.back(), v.end);
  EXPECT_GT(nbsp.size(), 2u);
}

TEST(SpecialTokenStrip, UserDefinedTokensStripWithoutParseSpecial) {
  Phi3Vocab v;
  v.data.types[v.assistant] = TokenType::kUserDefined;
  v.data.strip.assign(v.data.tokens.size(), kStripNone);
  v.data.strip[v.assistant] = kStripLeft | kStripRight;
  const auto tokenizer = Tokenizer::create(v.data);
  EXPECT_EQ(tokenizer->encode("Hello <|assistant|> Hello", false, false),
            (Ids{v.hello, v.assistant, v.hello}));
}

TEST(SpecialTokenStrip, HfAddedTokensAttributesAreRead) {
  // A Phi-3-style tokenizer.json (SentencePiece BPE with byte fallback): its chat tokens have
  // rstrip true, <|endoftext|> not, and "<|x|>" lstrip.
  HfTokenizerInputs in;
  in.tokenizer_json = R"({
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "model": {"type": "BPE", "byte_fallback": true, "merges": [],
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\u2581Hello": 4,
                "\u2581H": 5, "\u2581He": 6, "\u2581Hel": 7, "\u2581Hell": 8}},
    "added_tokens": [
      {"id": 9, "content": "<|user|>", "special": true, "lstrip": false, "rstrip": true},
      {"id": 10, "content": "<|end|>", "special": true, "lstrip": false, "rstrip": true},
      {"id": 11, "content": "<|assistant|>", "special": true, "lstrip": false, "rstrip": true},
      {"id": 12, "content": "<|endoftext|>", "special": true, "rstrip": false},
      {"id": 13, "content": "<|x|>", "special": false, "lstrip": true}]
  })";
  const TokenizerData data = parse_hf_tokenizer(in, "phi3-like");
  ASSERT_EQ(data.strip.size(), 14u);
  EXPECT_EQ(data.strip[9], kStripRight);
  EXPECT_EQ(data.strip[12], kStripNone);
  EXPECT_EQ(data.strip[13], kStripLeft);
  EXPECT_EQ(data.strip[4], kStripNone);
  const auto tokenizer = Tokenizer::create(data);
  EXPECT_EQ(tokenizer->encode(kPhi3Prompt, false, true), (Ids{9, 4, 10, 11}));
}

}  // namespace
}  // namespace rapide
