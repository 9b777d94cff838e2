// The vocabulary as a byte trie, built once per tokenizer, for computing token masks.
//
// Nodes are laid out in preorder: node i's subtree is [i, subtree_end[i]), so a walk that
// finds a prefix impossible skips every token under it with one jump. Tokens whose bytes are
// equal (a byte-fallback token and a one-byte piece) end at the same node. Tokens with no
// bytes (control tokens) are not in the trie: a grammar never allows them; end-of-generation
// tokens are listed apart, allowed exactly when the grammar accepts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rapide::grammar {

class TokenTrie {
 public:
  // pieces[id] = the bytes token id contributes to the text ("" for control tokens).
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> end_of_generation);

  int vocab_size() const { return vocab_size_; }
  size_t num_nodes() const { return byte_.size(); }
  // Node 0 is the root (no byte, depth 0).
  uint8_t byte(size_t node) const { return byte_[node]; }
  uint32_t depth(size_t node) const { return depth_[node]; }
  uint32_t subtree_end(size_t node) const { return subtree_end_[node]; }
  // Tokens ending at a node: tokens()[token_begin(node) .. token_begin(node + 1)).
  uint32_t token_begin(size_t node) const { return token_begin_[node]; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  uint32_t max_depth() const { return max_depth_; }
  const std::vector<int32_t>& end_of_generation() const { return end_of_generation_; }
  const std::string& piece(int32_t token) const { return pieces_[static_cast<size_t>(token)]; }

 private:
  int vocab_size_ = 0;
  std::vector<std::string> pieces_;
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> depth_;
  std::vector<uint32_t> subtree_end_;
  std::vector<uint32_t> token_begin_;  // num_nodes + 1 entries
  std::vector<int32_t> tokens_;
  std::vector<int32_t> end_of_generation_;
  uint32_t max_depth_ = 0;
};

// The trie of a tokenizer's vocabulary (Tokenizer::token_to_piece bytes; control tokens have
// none) with its end-of-generation tokens.
TokenTrie make_token_trie(const Tokenizer& tokenizer, std::vector<int32_t> end_of_generation);

}  // namespace rapide::grammar
