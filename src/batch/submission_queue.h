// The order batch requests go to the engine, and when: requests sharing a prompt prefix run
// together, and the ones that can reuse another's KV wait until it has been computed.
//
// Sorting a window by prompt tokens (prefix_order.h) puts requests with a common prefix side
// by side, but that alone is not enough: the prefix cache (kv/prefix_cache.h) only hands out
// blocks that are already computed, so 25 requests on one document admitted in the same step
// would all compute the document. Here each request depends on the earliest request before
// it in the window that holds the longest run of full KV blocks it can reuse; it is handed
// out only once that request has started generating (its prompt is in the cache). Requests
// without such a source go out at once, so other groups keep the engine busy meanwhile.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "batch/batch_request.h"
#include "batch/prefix_order.h"

namespace rapide::batch {

// Names a request handed out, so the runner can report that it started.
struct Ticket {
  uint64_t window = 0;
  uint32_t index = 0;
};

// For requests already in run order: the index of the request each one waits for, or -1.
// `block_size` is the KV block size in tokens (only whole blocks are reused).
std::vector<int> reuse_dependencies(const std::vector<BatchRequest>& requests, int block_size);

class SubmissionQueue {
 public:
  // kInput: file order, nothing waits. kPrefix: sorted, with dependencies.
  SubmissionQueue(BatchOrder order, int block_size);

  // Takes a window of requests read from the input.
  void add_window(std::vector<BatchRequest> requests);
  // The next request that may run now, or nullopt when all left wait for others to start
  // (or none are left).
  std::optional<std::pair<BatchRequest, Ticket>> next();
  // The request has started (its first token came back, or it failed): requests waiting to
  // reuse its prefix may go.
  void started(const Ticket& ticket);

  // Whether a new window should be read: every request handed out or waiting on a running one.
  bool wants_window() const;
  // Requests not yet handed out (waiting ones included).
  size_t held() const { return held_; }

 private:
  struct Window {
    std::vector<BatchRequest> requests;
    std::vector<int> dependency;
    std::vector<bool> started;
    std::vector<std::vector<uint32_t>> waiting;  // per request: those that wait for it
    uint32_t cursor = 0;                         // next request not yet looked at
    uint32_t unstarted = 0;
  };

  BatchOrder order_;
  int block_size_;
  uint64_t next_serial_ = 0;
  std::map<uint64_t, Window> windows_;  // alive until each request started
  std::deque<Ticket> ready_;            // released by a started dependency
  size_t held_ = 0;
};

}  // namespace rapide::batch
