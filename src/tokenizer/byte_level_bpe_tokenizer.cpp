#include "tokenizer/byte_level_bpe_tokenizer.h"

#include <queue>

#include "base/error.h"
#include "tokenizer/byte_level_codec.h"

namespace rapide {
namespace {

struct Symbol {
  int32_t id;  // -1 for a byte without a token; such symbols never merge
  int prev;
  int next;
  bool alive;  // false once merged into the symbol on its left
};

struct Bigram {
  int32_t rank;
  int left;
  int right;
  int32_t left_id;  // ids when queued, to detect entries made stale by other merges
  int32_t right_id;
};

// Lowest rank first; on equal ranks the leftmost pair, as llama.cpp's llm_bigram_bpe.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(const TokenizerData& data)
    : Tokenizer(data), pre_tokenizer_(data.pre) {
  data_.add_space_prefix = false;
  for (int b = 0; b < 256; ++b) {
    byte_tokens_[b] = index().find(byte_level::byte_to_symbol(static_cast<uint8_t>(b)));
  }

  merges_.reserve(data_.merges.size());
  for (size_t rank = 0; rank < data_.merges.size(); ++rank) {
    const std::string& merge = data_.merges[rank];
    // Search from 1 so a part that is itself a space character cannot be split off empty.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      fail(ErrorCode::kCorrupt, "tokenizer: merge {} '{}' is not two tokens separated by a space",
           rank, merge);
    }
    const std::string_view left_text = std::string_view(merge).substr(0, space);
    const std::string_view right_text = std::string_view(merge).substr(space + 1);
    const int32_t left = index().find(left_text);
    const int32_t right = index().find(right_text);
    const int32_t result = index().find(std::string(left_text) + std::string(right_text));
    if (left < 0 || right < 0 || result < 0) {
      fail(ErrorCode::kCorrupt, "tokenizer: merge {} '{}' names a token not in the vocabulary",
           rank, merge);
    }
    // The first (highest priority) occurrence of a duplicated merge wins, as in llama.cpp.
    merges_.try_emplace(pair_key(left, right), Merge{static_cast<int32_t>(rank), result});
  }

  pieces_.resize(data_.tokens.size());
  for (size_t id = 0; id < data_.tokens.size(); ++id) {
    switch (data_.types[id]) {
      case TokenType::kNormal:
        pieces_[id] = byte_level::symbols_to_bytes(data_.tokens[id]);
        break;
      case TokenType::kUserDefined:
        pieces_[id] = data_.tokens[id];
        break;
      default:  // control, unknown, unused, byte, undefined: nothing, as in llama.cpp
        break;
    }
  }
}

std::string ByteLevelBpeTokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  const TokenType type = type_of(id);
  if (render_special && (type == TokenType::kControl || type == TokenType::kUnknown)) {
    return data_.tokens[id];
  }
  return pieces_[id];
}

const ByteLevelBpeTokenizer::Merge* ByteLevelBpeTokenizer::find_merge(int32_t left,
                                                                      int32_t right) const {
  if (left < 0 || right < 0) return nullptr;
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void ByteLevelBpeTokenizer::encode_text(std::string_view text, bool /*after_special*/,
                                        std::vector<int32_t>& out) const {
  for (const std::string_view word : pre_tokenizer_.split(text)) encode_word(word, out);
}

void ByteLevelBpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (pre_tokenizer_.ignore_merges()) {
    std::string mapped;
    for (const char c : word) mapped += byte_level::byte_to_symbol(static_cast<uint8_t>(c));
    const int32_t id = index().find(mapped);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols(word.size());
  const int n = static_cast<int>(word.size());
  for (int i = 0; i < n; ++i) {
    symbols[i] = {byte_tokens_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Merge* merge = find_merge(symbols[left].id, symbols[right].id);
    if (merge != nullptr) {
      queue.push({merge->rank, left, right, symbols[left].id, symbols[right].id});
    }
  };
  for (int i = 1; i < n; ++i) try_add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Symbols only grow, so unchanged ids on two live symbols mean the pair is still current.
    if (!left.alive || !right.alive || left.id != bigram.left_id || right.id != bigram.right_id) {
      continue;
    }
    left.id = find_merge(left.id, right.id)->result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int i = 0; i != -1 && n > 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) {
      out.push_back(symbols[i].id);
    } else if (data_.unk_id >= 0) {
      // A vocabulary missing some byte's character (not a proper byte-level one) cannot say
      // that byte; llama.cpp drops it, the unknown token at least keeps a trace.
      out.push_back(data_.unk_id);
    }
  }
}

}  // namespace rapide
