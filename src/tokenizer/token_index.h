// Token text -> id lookup shared by both tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rapide {

class TokenIndex {
 public:
  // When two tokens share a text the later id wins, as in llama.cpp (its token_to_id map is
  // filled in id order), so both engines agree on such vocabularies.
  explicit TokenIndex(const std::vector<std::string>& tokens);

  // The id whose text is `text`, or -1. Takes a view so hot loops need no temporary string.
  int32_t find(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }
  // Longest token text in bytes: merges that would produce a longer string cannot succeed.
  size_t max_token_length() const { return max_length_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  size_t max_length_ = 0;
};

}  // namespace rapide
