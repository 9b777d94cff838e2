#include "tokenizer/sentencepiece_tokenizer.h"

#include <fmt/format.h>

#include <queue>

#include "base/error.h"
#include "tokenizer/utf8.h"

namespace rapide {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, sentencepiece's space

struct Symbol {
  size_t offset;  // into the escaped text
  size_t length;  // bytes; 0 once merged into the symbol on its left
  int prev;
  int next;
};

struct Bigram {
  float score;
  int left;
  int right;
  size_t length;  // bytes of the merged text, to detect entries made stale by other merges
};

// Highest score first; on equal scores the leftmost pair, as llama.cpp's llm_bigram_spm.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  for (size_t pos = text.find(from); pos != std::string_view::npos; pos = text.find(from, start)) {
    out.append(text, start, pos - start);
    out.append(to);
    start = pos + from.size();
  }
  out.append(text, start);
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const TokenizerData& data) : Tokenizer(data) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string name = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = index().find(name);
    if (id < 0) id = index().find(std::string(1, static_cast<char>(b)));
    byte_tokens_[b] = id;
  }

  pieces_.resize(data_.tokens.size());
  for (size_t id = 0; id < data_.tokens.size(); ++id) {
    const std::string& text = data_.tokens[id];
    switch (data_.types[id]) {
      case TokenType::kNormal:
        pieces_[id] = replace_all(text, kSpaceMarker, " ");
        break;
      case TokenType::kByte:
        if (text.size() == 6 && text.starts_with("<0x") && hex_value(text[3]) >= 0 &&
            hex_value(text[4]) >= 0) {
          pieces_[id] =
              std::string(1, static_cast<char>(hex_value(text[3]) * 16 + hex_value(text[4])));
        } else {
          pieces_[id] = text;
        }
        break;
      case TokenType::kUserDefined:
        pieces_[id] = text;
        break;
      default:  // control, unknown, unused, undefined: nothing, as in llama.cpp
        break;
    }
  }
}

std::string SentencePieceTokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  const TokenType type = type_of(id);
  if (render_special && (type == TokenType::kControl || type == TokenType::kUnknown)) {
    return data_.tokens[id];
  }
  return pieces_[id];
}

void SentencePieceTokenizer::encode_text(std::string_view fragment, bool after_special,
                                         std::vector<int32_t>& out) const {
  std::string text;
  if (data_.add_space_prefix && after_special) text = kSpaceMarker;
  text += replace_all(fragment, " ", kSpaceMarker);
  if (text.empty()) return;

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t length =
        std::min(utf8::sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    offset += length;
    symbols.push_back({offset - length, length, index - 1, offset == text.size() ? -1 : index + 1});
  }

  std::vector<Bigram> storage;
  storage.reserve(symbols.size());
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue(BigramOrder{},
                                                                      std::move(storage));
  const size_t max_length = index().max_token_length();
  auto try_add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    if (length > max_length) return;
    // Adjacent symbols cover adjacent bytes, so the pair is a view into `text`.
    const int32_t id = index().find(std::string_view(text).substr(symbols[left].offset, length));
    if (id < 0) return;
    queue.push({data_.scores[id], left, right, length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;  // one side was merged elsewhere since this pair was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece =
        std::string_view(text).substr(symbols[i].offset, symbols[i].length);
    const int32_t id = index().find(piece);
    if (id >= 0) {
      out.push_back(id);
    } else {
      append_fallback(piece, out);
    }
  }
}

void SentencePieceTokenizer::append_fallback(std::string_view character,
                                             std::vector<int32_t>& out) const {
  bool all_bytes = true;
  for (const char c : character)
    all_bytes = all_bytes && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
  if (all_bytes) {
    for (const char c : character) out.push_back(byte_tokens_[static_cast<uint8_t>(c)]);
  } else if (data_.unk_id >= 0) {
    out.push_back(data_.unk_id);
  } else {
    std::string hex;
    for (const char c : character) hex += fmt::format("{:02X}", static_cast<uint8_t>(c));
    fail(ErrorCode::kInvalidArgument,
         "tokenizer: cannot encode the bytes 0x{}: the vocabulary has neither byte tokens nor "
         "an unknown token",
         hex);
  }
}

}  // namespace rapide
