#include "batch/prefix_order.h"

#include <algorithm>

#include "base/error.h"

namespace rapide::batch {

BatchOrder parse_batch_order(const std::string& text) {
  if (text == "prefix") return BatchOrder::kPrefix;
  if (text == "input") return BatchOrder::kInput;
  fail(ErrorCode::kInvalidArgument, "--order must be prefix or input, got '{}'", text);
}

const char* batch_order_name(BatchOrder order) {
  return order == BatchOrder::kPrefix ? "prefix" : "input";
}

void order_window(std::vector<BatchRequest>& window, BatchOrder order) {
  if (order == BatchOrder::kInput) return;
  // A request's first prompt is its key: the others of a multi-prompt request follow it
  // into the engine right after it anyway.
  std::stable_sort(window.begin(), window.end(), [](const BatchRequest& a, const BatchRequest& b) {
    return a.spec.prompts.front() < b.spec.prompts.front();
  });
}

}  // namespace rapide::batch
