#include "batch/submission_queue.h"

#include <algorithm>

namespace rapide::batch {

namespace {

// Whole KV blocks two prompts share from their start.
int shared_blocks(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int block_size) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int>(ia - a.begin()) / block_size;
}

}  // namespace

std::vector<int> reuse_dependencies(const std::vector<BatchRequest>& requests, int block_size) {
  std::vector<int> dependency(requests.size(), -1);
  std::vector<int> reused(requests.size(), 0);  // blocks request i reuses from its dependency
  for (size_t i = 1; i < requests.size(); ++i) {
    // In sorted order the previous request shares the longest prefix with this one...
    int d = static_cast<int>(i) - 1;
    const int blocks = shared_blocks(requests[d].spec.prompts.front(),
                                     requests[i].spec.prompts.front(), block_size);
    if (blocks == 0) continue;
    // ...but the blocks may come from further back: wait for the earliest request that
    // computes all of them, not for a chain of requests that each reuse them.
    while (dependency[d] >= 0 && reused[d] >= blocks) d = dependency[d];
    dependency[i] = d;
    reused[i] = blocks;
  }
  return dependency;
}

SubmissionQueue::SubmissionQueue(BatchOrder order, int block_size)
    : order_(order), block_size_(std::max(block_size, 1)) {}

void SubmissionQueue::add_window(std::vector<BatchRequest> requests) {
  if (requests.empty()) return;
  order_window(requests, order_);
  Window w;
  const size_t n = requests.size();
  w.dependency = order_ == BatchOrder::kPrefix ? reuse_dependencies(requests, block_size_)
                                               : std::vector<int>(n, -1);
  w.requests = std::move(requests);
  w.started.assign(n, false);
  w.waiting.resize(n);
  w.unstarted = static_cast<uint32_t>(n);
  held_ += n;
  windows_.emplace(next_serial_++, std::move(w));
}

std::optional<std::pair<BatchRequest, Ticket>> SubmissionQueue::next() {
  auto hand_out = [&](Window& w, Ticket t) {
    --held_;
    return std::make_pair(std::move(w.requests[t.index]), t);
  };
  if (!ready_.empty()) {
    const Ticket t = ready_.front();
    ready_.pop_front();
    return hand_out(windows_.at(t.window), t);
  }
  for (auto& [serial, w] : windows_) {
    while (w.cursor < w.requests.size()) {
      const uint32_t i = w.cursor++;
      const int d = w.dependency[i];
      if (d >= 0 && !w.started[d]) {
        w.waiting[d].push_back(i);  // goes out when its prefix source starts
        continue;
      }
      return hand_out(w, Ticket{serial, i});
    }
  }
  return std::nullopt;
}

void SubmissionQueue::started(const Ticket& ticket) {
  const auto it = windows_.find(ticket.window);
  if (it == windows_.end()) return;
  Window& w = it->second;
  if (w.started[ticket.index]) return;
  w.started[ticket.index] = true;
  for (const uint32_t i : w.waiting[ticket.index]) ready_.push_back({ticket.window, i});
  w.waiting[ticket.index].clear();
  w.waiting[ticket.index].shrink_to_fit();
  if (--w.unstarted == 0) windows_.erase(it);
}

bool SubmissionQueue::wants_window() const {
  if (!ready_.empty()) return false;
  return std::all_of(windows_.begin(), windows_.end(), [](const auto& entry) {
    return entry.second.cursor == entry.second.requests.size();
  });
}

}  // namespace rapide::batch
