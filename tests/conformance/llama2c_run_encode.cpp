#include "llama2c_run_encode.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace rapide::testing {

Llama2cRunEncoder::Llama2cRunEncoder(const std::string& tokenizer_bin, int vocab_size) {
  std::ifstream in(tokenizer_bin, std::ios::binary);
  int32_t max_token_length = 0;
  in.read(reinterpret_cast<char*>(&max_token_length), 4);
  for (int i = 0; i < vocab_size; ++i) {
    float score = 0;
    int32_t length = 0;
    in.read(reinterpret_cast<char*>(&score), 4);
    in.read(reinterpret_cast<char*>(&length), 4);
    std::string piece(static_cast<size_t>(length), '\0');
    in.read(piece.data(), length);
    ids_.emplace(piece, i);
    vocab_.push_back(piece);
    scores_.push_back(score);
  }
  if (!in) throw std::runtime_error("cannot read " + tokenizer_bin);
}

int32_t Llama2cRunEncoder::lookup(const std::string& piece) const {
  // run.c bsearches a sorted copy; with unique pieces a hash map finds the same id.
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cRunEncoder::encode(const std::string& text, bool bos) const {
  std::vector<int32_t> tokens;
  if (bos) tokens.push_back(1);
  if (!text.empty()) tokens.push_back(lookup(" "));
  std::string buffer;
  for (size_t i = 0; i < text.size(); ++i) {
    // Reset on a non-continuation byte: a new character starts.
    if ((text[i] & 0xC0) != 0x80) buffer.clear();
    buffer += text[i];
    if (i + 1 < text.size() && (text[i + 1] & 0xC0) == 0x80 && buffer.size() < 4) continue;
    const int32_t id = lookup(buffer);
    if (id != -1) {
      tokens.push_back(id);
    } else {
      for (const char c : buffer) tokens.push_back(static_cast<uint8_t>(c) + 3);
    }
    buffer.clear();
  }
  while (true) {
    float best_score = -1e10f;
    int32_t best_id = -1;
    int best_index = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int32_t id = lookup(vocab_[tokens[i]] + vocab_[tokens[i + 1]]);
      if (id != -1 && scores_[id] > best_score) {
        best_score = scores_[id];
        best_id = id;
        best_index = static_cast<int>(i);
      }
    }
    if (best_index == -1) break;
    tokens[best_index] = best_id;
    tokens.erase(tokens.begin() + best_index + 1);
  }
  return tokens;
}

}  // namespace rapide::testing
