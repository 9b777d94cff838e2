#include "engine/prefill_router.h"

#include <tuple>

#include "base/error.h"

namespace rapide {

PrefillRouter::PrefillRouter(int ranks) {
  if (ranks < 1) fail(ErrorCode::kInvalidArgument, "a prefill router needs a rank, got {}", ranks);
  loads_.resize(static_cast<size_t>(ranks));
}

int PrefillRouter::route(RequestId id, uint64_t tokens) {
  if (outstanding_.count(id) != 0) {
    fail(ErrorCode::kInvalidArgument, "request {} is already at a prefill rank", id);
  }
  int best = 0;
  const auto key = [&](int r) {
    const PrefillRankLoad& l = loads_[static_cast<size_t>(r)];
    return std::tuple(l.outstanding_tokens, l.routed_prompts, r);
  };
  for (int r = 1; r < ranks(); ++r) {
    if (key(r) < key(best)) best = r;
  }
  PrefillRankLoad& l = loads_[static_cast<size_t>(best)];
  l.outstanding_tokens += tokens;
  l.outstanding_prompts += 1;
  l.routed_prompts += 1;
  l.routed_tokens += tokens;
  outstanding_.emplace(id, Routed{best, tokens});
  return best;
}

int PrefillRouter::answered(RequestId id) {
  const auto it = outstanding_.find(id);
  if (it == outstanding_.end()) return -1;
  PrefillRankLoad& l = loads_[static_cast<size_t>(it->second.rank)];
  l.outstanding_tokens -= it->second.tokens;
  l.outstanding_prompts -= 1;
  const int rank = it->second.rank;
  outstanding_.erase(it);
  return rank;
}

}  // namespace rapide
