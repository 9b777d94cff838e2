// The architecture lists of the loader's tables (known_keys.cpp, unused_tensors.cpp,
// hf_config_keys.cpp): "*" for every architecture rapide runs, or names separated by single
// spaces: GGUF architectures ("llama qwen2moe"), or transformers classes for config.json.
#pragma once

#include <algorithm>
#include <string_view>

namespace rapide {

inline bool architecture_listed(std::string_view list, std::string_view architecture) {
  if (list == "*") return true;
  size_t start = 0;
  while (start < list.size()) {
    const size_t end = std::min(list.find(' ', start), list.size());
    if (list.substr(start, end - start) == architecture) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace rapide
