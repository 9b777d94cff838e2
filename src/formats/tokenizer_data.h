// Everything a tokenizer needs, as found in a model file (GGUF metadata, tokenizer.bin or
// tokenizer.json). Formats fill it; src/tokenizer builds a Tokenizer from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rapide {

enum class TokenizerKind {
  kNone,           // the file carries no vocabulary
  kSentencePiece,  // SentencePiece-style BPE with byte fallback (GGUF tokenizer.ggml.model =
                   // "llama")
  kByteLevelBpe,   // GPT-2 style byte-level BPE with merges (GGUF "gpt2")
};

// GGUF token types (llama.cpp llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Whitespace a special token swallows where it is found in text (Hugging Face added_tokens
// lstrip/rstrip, llama.cpp's LLAMA_TOKEN_ATTR_LSTRIP/RSTRIP): bits of TokenizerData::strip.
enum TokenStrip : uint8_t {
  kStripNone = 0,
  kStripLeft = 1,   // drop the whitespace just before the token
  kStripRight = 2,  // drop the whitespace just after it
};

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::kNone;
  // Pre-tokenizer family for byte-level BPE (GGUF tokenizer.ggml.pre): "default", "gpt-2",
  // "llama-bpe", "qwen2", ... (tokenizer/pre_tokenizer_rules.h). Empty means "default".
  std::string pre;
  std::vector<std::string> tokens;  // token text (SentencePiece uses U+2581 for space)
  // scores and types always have one entry per token, whatever the format.
  std::vector<float> scores;        // SentencePiece merge priority (higher merges first); 0 when
                                    // the file has none, -1000 from an HF tokenizer.json as
                                    // llama.cpp's converter writes
  std::vector<TokenType> types;     // per token; kNormal when the file has none
  std::vector<std::string> merges;  // byte-level BPE: "left right", highest priority first
  // Per token TokenStrip bits, or empty when the file has no such attributes (GGUF): then
  // the tokenizer derives them from model_name as llama.cpp does (see tokenizer.cpp).
  std::vector<uint8_t> strip;
  std::string model_name;  // GGUF general.name, "" when unknown
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece: prepend a space to the text
  std::string chat_template;     // Jinja source, empty if the model has none
};

}  // namespace rapide
