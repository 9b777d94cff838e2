// The order a window of batch requests runs in.
//
// Requests that share a prompt prefix should run close together: the first one computes the
// shared KV blocks and the prefix cache (kv/prefix_cache.h) hands them to the rest, while
// they are still in RAM. Sorting a window by prompt tokens puts every group of requests with
// a common prefix next to each other, longest shared runs adjacent. Output order does not
// matter to a batch (records carry their custom_id and input line), so this is free.
#pragma once

#include <string>
#include <vector>

#include "batch/batch_request.h"

namespace rapide::batch {

enum class BatchOrder {
  kPrefix,  // sort each window by prompt tokens
  kInput,   // run lines in file order
};

BatchOrder parse_batch_order(const std::string& text);
const char* batch_order_name(BatchOrder order);

// Reorders `window` for `order`; ties keep input order, so a run is deterministic.
void order_window(std::vector<BatchRequest>& window, BatchOrder order);

}  // namespace rapide::batch
