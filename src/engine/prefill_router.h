// Which prefill rank computes the next prompt (disaggregation with several prefill ranks,
// distributed/disaggregation.h). Plain bookkeeping, no MPI: the link calls route() when it sends a
// prompt and answered() when that prompt's K/V frame comes back.
//
// The rule: the rank with the fewest prompt tokens outstanding (sent, not yet answered),
// because a rank's queue drains at its prefill speed, which is per token; ties go to the rank
// that was given the fewest prompts so far, then to the lowest rank. So one client's
// sequential requests alternate between idle ranks, and a rank that stops answering keeps
// its outstanding tokens and stops being chosen while another is lighter.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/request.h"

namespace rapide {

struct PrefillRankLoad {
  uint64_t outstanding_tokens = 0;
  uint32_t outstanding_prompts = 0;
  uint64_t routed_prompts = 0;  // ever given
  uint64_t routed_tokens = 0;
};

class PrefillRouter {
 public:
  // `ranks` prefill ranks, numbered 0..ranks-1 here (the link maps them to MPI ranks).
  explicit PrefillRouter(int ranks);

  // Chooses the rank for request `id`'s `tokens` prompt tokens and counts them on it.
  // Throws Error(kInvalidArgument) when `id` is already outstanding.
  int route(RequestId id, uint64_t tokens);
  // The rank that had `id`, its tokens no longer outstanding; -1 for an id not outstanding
  // (answered already, or never routed).
  int answered(RequestId id);

  int ranks() const { return static_cast<int>(loads_.size()); }
  const std::vector<PrefillRankLoad>& loads() const { return loads_; }

 private:
  struct Routed {
    int rank = 0;
    uint64_t tokens = 0;
  };
  std::vector<PrefillRankLoad> loads_;
  std::unordered_map<RequestId, Routed> outstanding_;
};

}  // namespace rapide
