#include "tokenizer/token_index.h"

#include <algorithm>

namespace rapide {

TokenIndex::TokenIndex(const std::vector<std::string>& tokens) {
  ids_.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ids_.insert_or_assign(tokens[i], static_cast<int32_t>(i));
    max_length_ = std::max(max_length_, tokens[i].size());
  }
}

}  // namespace rapide
