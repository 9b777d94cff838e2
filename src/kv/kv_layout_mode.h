// `--kv-layout paged|contiguous`: how a sequence's KV blocks are reserved.
//
//   kPaged       blocks are taken as the sequence grows (PagedAttention); at most one
//                partly used block per sequence, so almost no memory is wasted.
//   kContiguous  each sequence reserves max-context positions at admission, what engines
//                without paging do; kept as the baseline the advisor compares against.
//
// Both hand attention the same block tables, so the math (and the output) is identical.
#pragma once

#include <string_view>

namespace rapide {

enum class KvLayoutMode { kPaged, kContiguous };

// "paged" or "contiguous"; throws Error(kInvalidArgument) otherwise.
KvLayoutMode parse_kv_layout_mode(std::string_view text);
const char* kv_layout_mode_name(KvLayoutMode mode);

}  // namespace rapide
