#include "kv/kv_layout_mode.h"

#include "base/error.h"

namespace rapide {

KvLayoutMode parse_kv_layout_mode(std::string_view text) {
  if (text == "paged") return KvLayoutMode::kPaged;
  if (text == "contiguous") return KvLayoutMode::kContiguous;
  fail(ErrorCode::kInvalidArgument, "unknown KV layout '{}': expected paged or contiguous", text);
}

const char* kv_layout_mode_name(KvLayoutMode mode) {
  return mode == KvLayoutMode::kPaged ? "paged" : "contiguous";
}

}  // namespace rapide
