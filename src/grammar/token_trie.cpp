#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace rapide::grammar {

// Sorting the pieces makes the trie's preorder the sorted order: each piece shares its
// longest common prefix with the previous one, pops the path below it and pushes the rest.
TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> end_of_generation)
    : vocab_size_(static_cast<int>(pieces.size())),
      pieces_(pieces),
      end_of_generation_(std::move(end_of_generation)) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const bool eog = std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
                     end_of_generation_.end();
    if (!pieces[static_cast<size_t>(id)].empty() && !eog) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
  });
  byte_.push_back(0);
  depth_.push_back(0);
  subtree_end_.push_back(0);
  std::vector<uint32_t> token_count(1, 0);
  std::vector<uint32_t> path{0};  // node at each depth of the current piece
  std::string previous;
  for (const int32_t id : order) {
    const std::string& piece = pieces[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < piece.size() && common < previous.size() && piece[common] == previous[common]) {
      ++common;
    }
    while (path.size() > common + 1) {
      subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t i = common; i < piece.size(); ++i) {
      path.push_back(static_cast<uint32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(piece[i]));
      depth_.push_back(static_cast<uint32_t>(i + 1));
      subtree_end_.push_back(0);
      token_count.push_back(0);
    }
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(piece.size()));
    ++token_count[path.back()];
    tokens_.push_back(id);  // sorted order = preorder of the node each ends at
    previous = piece;
  }
  while (!path.empty()) {
    subtree_end_[path.back()] = static_cast<uint32_t>(byte_.size());
    path.pop_back();
  }
  token_begin_.resize(byte_.size() + 1, 0);
  for (size_t n = 0; n < byte_.size(); ++n) token_begin_[n + 1] = token_begin_[n] + token_count[n];
}

TokenTrie make_token_trie(const Tokenizer& tokenizer, std::vector<int32_t> end_of_generation) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id);
  }
  return TokenTrie(pieces, std::move(end_of_generation));
}

}  // namespace rapide::grammar
