#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/error.h"
#include "tokenizer/byte_level_bpe_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace rapide {
namespace {

// Control tokens that end a turn in chat models; llama.cpp treats the same names as
// end-of-generation even when the file names another token as EOS.
constexpr std::array<std::string_view, 10> kEndOfGenerationNames = {
    "<|eot_id|>",    "<|eom_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "</s>",       "<EOT>",   "<|return|>",
};

bool is_byte_token_text(const std::string& text) {
  return text.size() == 6 && text.starts_with("<0x") && text[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(text[3])) &&
         std::isxdigit(static_cast<unsigned char>(text[4]));
}

void check_special_id(const TokenizerData& data, int32_t id, const char* what) {
  if (id < -1 || id >= static_cast<int32_t>(data.tokens.size())) {
    fail(ErrorCode::kCorrupt, "tokenizer: {} id {} is outside the vocabulary of {} tokens", what,
         id, data.tokens.size());
  }
}

// GGUF files carry no lstrip/rstrip attributes. llama.cpp (llama_vocab::load, "per token
// attributes") sets them from the model's name instead: for a general.name containing "phi-3"
// or "phi3", every special token (control, user-defined, unknown) and "</s>" swallow the
// whitespace after them, except "<unk>", "<s>" and "<|endoftext|>". Its other name rule
// (lstrip on jina's "<mask>") concerns WordPiece vocabularies, which rapide does not read.
void derive_strip_from_name(TokenizerData& data) {
  std::string name = data.model_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  data.strip.assign(data.tokens.size(), kStripNone);
  for (size_t i = 0; i < data.tokens.size(); ++i) {
    const TokenType type = data.types[i];
    const std::string& text = data.tokens[i];
    const bool special = type == TokenType::kControl || type == TokenType::kUserDefined ||
                         type == TokenType::kUnknown || text == "</s>";
    if (special && text != "<unk>" && text != "<s>" && text != "<|endoftext|>") {
      data.strip[i] = kStripRight;
    }
  }
}

// Fills what a file may leave out so the algorithms can index types/scores by id.
TokenizerData normalized(const TokenizerData& input) {
  TokenizerData data = input;
  const size_t n = data.tokens.size();
  if (data.types.size() > n || data.scores.size() > n) {
    fail(ErrorCode::kCorrupt, "tokenizer: {} types and {} scores for {} tokens", data.types.size(),
         data.scores.size(), n);
  }
  data.types.resize(n, TokenType::kNormal);
  data.scores.resize(n, 0.0f);
  check_special_id(data, data.bos_id, "BOS");
  check_special_id(data, data.eos_id, "EOS");
  check_special_id(data, data.unk_id, "unknown-token");
  if (data.pad_id >= static_cast<int32_t>(n)) data.pad_id = -1;

  // Files without token types (llama2.c tokenizer.bin) still have the SentencePiece layout:
  // infer the types llama.cpp's converter would have written, so that BOS/EOS render as
  // control tokens and "<0xXX>" pieces decode to their byte.
  const bool has_types = std::any_of(data.types.begin(), data.types.end(), [](TokenType t) {
    return t != TokenType::kNormal && t != TokenType::kUndefined;
  });
  if (!has_types) {
    for (size_t i = 0; i < n; ++i) {
      if (data.kind == TokenizerKind::kSentencePiece && is_byte_token_text(data.tokens[i])) {
        data.types[i] = TokenType::kByte;
      }
    }
    if (data.bos_id >= 0) data.types[data.bos_id] = TokenType::kControl;
    if (data.eos_id >= 0) data.types[data.eos_id] = TokenType::kControl;
    if (data.unk_id >= 0) data.types[data.unk_id] = TokenType::kUnknown;
  }
  if (data.strip.size() > n) {
    fail(ErrorCode::kCorrupt, "tokenizer: {} strip attributes for {} tokens", data.strip.size(), n);
  }
  if (data.strip.empty()) derive_strip_from_name(data);
  data.strip.resize(n, kStripNone);
  return data;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(const TokenizerData& data) {
  switch (data.kind) {
    case TokenizerKind::kSentencePiece:
      return std::make_unique<SentencePieceTokenizer>(data);
    case TokenizerKind::kByteLevelBpe:
      return std::make_unique<ByteLevelBpeTokenizer>(data);
    case TokenizerKind::kNone:
      break;
  }
  fail(ErrorCode::kUnsupported, "tokenizer: the model file carries no vocabulary");
}

Tokenizer::Tokenizer(const TokenizerData& data)
    : data_(normalized(data)), index_(data_.tokens), splitter_(data_) {
  end_of_generation_.assign(data_.tokens.size(), false);
  if (data_.eos_id >= 0) end_of_generation_[data_.eos_id] = true;
  for (const std::string_view name : kEndOfGenerationNames) {
    const int32_t id = index_.find(name);
    if (id >= 0 && data_.types[id] == TokenType::kControl) end_of_generation_[id] = true;
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && data_.add_bos && data_.bos_id >= 0) ids.push_back(data_.bos_id);
  bool after_special = true;
  for (const TextFragment& fragment : splitter_.split(text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
    } else {
      encode_text(text.substr(fragment.offset, fragment.length), after_special, ids);
      after_special = false;
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_leading_space,
                              bool render_special) const {
  std::string text;
  bool strip = skip_leading_space && add_space_prefix();
  for (const int32_t id : ids) {
    const std::string piece = token_to_piece(id, render_special);
    if (piece.empty()) continue;
    if (strip && piece.front() == ' ') {
      text.append(piece, 1);
    } else {
      text += piece;
    }
    strip = false;
  }
  return text;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < vocab_size() && end_of_generation_[id];
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && data_.types[id] == TokenType::kControl;
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary of {} tokens", id,
         vocab_size());
  }
}

}  // namespace rapide
