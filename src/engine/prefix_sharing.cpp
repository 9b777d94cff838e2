#include "engine/prefix_sharing.h"

#include <vector>

#include "kv/block_hash.h"

namespace rapide {

PrefixSharingProbe::PrefixSharingProbe(int block_size, uint64_t extra_key, size_t max_hashes)
    : block_size_(block_size), extra_key_(extra_key), max_hashes_(max_hashes) {}

void PrefixSharingProbe::observe(std::span<const int32_t> prompt) {
  std::vector<uint64_t> hashes;
  extend_block_hashes(prompt, block_size_, extra_key_, hashes);
  // The leading run of known blocks is what a cache could serve: a block after the first
  // unknown one has a different chain (its hash covers everything before it).
  size_t known = 0;
  for (; known < hashes.size(); ++known) {
    const auto it = seen_.find(hashes[known]);
    if (it == seen_.end()) break;
    if (!it->second) stats_.recurring_blocks++;
    it->second = true;
  }
  if (seen_.size() + hashes.size() > max_hashes_) seen_.clear();
  for (const uint64_t h : hashes) seen_.emplace(h, false);
  stats_.prompts++;
  stats_.prompt_tokens += prompt.size();
  stats_.shareable_tokens += known * static_cast<uint64_t>(block_size_);
  if (known > 0) stats_.sharing_prompts++;
}

}  // namespace rapide
