// PrefixCache: automatic prefix caching over the BlockPool (after vLLM v1's
// kv_cache_manager.py / block_pool.py), with an optional OffloadTier behind it.
//
// Every full, computed block of a sequence is registered under its block hash
// (block_hash.h) and marked in the pool, so when its sequence finishes it stays as an
// evictable cached block instead of being wiped. A new (or preempted, re-admitted)
// sequence looks up its block hashes in order and reuses the longest run found, then the
// leading tokens it shares with a cached block after that run (copied), leaving at least
// its last token to compute so the model produces logits. Hits share blocks by
// reference count; the pool never hands out a block in use.
//
// The directory below maps each known hash to where its content is: a pool block, the
// offload tier, or both. When the pool evicts a cached block (LRU), the listener copies
// its still-intact bytes to the tier; a later hit imports it back. The directory also
// keeps each block's parent hash and token ids: matches are verified token by token (a
// 64-bit hash collision cannot serve wrong K/V), and a prompt that reused less than it
// could have is compared with the cached chains to explain where it diverged.
//
// Not thread-safe: the engine thread owns it, like the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/offload_tier.h"
#include "kv/paged_kv_store.h"

namespace rapide {

struct PrefixCacheStats {
  uint64_t queries = 0;          // admissions looked up (preempted re-admissions included)
  uint64_t hits = 0;             // admissions that reused at least one block
  uint64_t prompt_tokens = 0;    // tokens the admitted sequences held
  uint64_t ram_hit_tokens = 0;   // of those, served by blocks still in RAM
  uint64_t tier_hit_tokens = 0;  // loaded back from the offload tier
  uint64_t computed_tokens = 0;  // left to compute
  uint64_t evicted_blocks = 0;   // cached blocks whose memory was taken for new content
  uint64_t cached_blocks = 0;    // blocks the directory knows now (RAM or tier)
  uint64_t ram_cached_blocks = 0;
  uint64_t miss_records = 0;    // partial misses explained so far
  uint64_t adopted_blocks = 0;  // blocks another store computed, adopted (disaggregation)
  bool offload_enabled = false;
  OffloadStats offload;
  double hit_rate() const {
    return prompt_tokens == 0
               ? 0.0
               : static_cast<double>(ram_hit_tokens + tier_hit_tokens) / prompt_tokens;
  }
};

// A request that reused less than it could have, in tokens: it shares `matched_tokens`
// with the best cached chain (its first `reused_tokens` were served from the cache: whole
// blocks, then the leading tokens of the block after them; every block after a difference
// is recomputed, since a block's hash covers everything before it),
// and after the difference it agrees with that chain again (a near miss: a timestamp or an
// id in an otherwise identical prompt, kv/near_miss.h). The difference may sit anywhere:
// in the first block (nothing reused), on a block boundary, or further in. The engine turns
// the token windows into text.
struct PrefixDivergence {
  uint64_t request_id = 0;
  int prompt_tokens = 0;
  int reused_tokens = 0;
  int matched_tokens = 0;             // == the first divergent token position
  std::vector<int32_t> common;        // the prompt's tokens before the divergence
  std::vector<int32_t> prompt_after;  // the prompt from the divergence on (a window)
  std::vector<int32_t> cached_after;  // the cached chain from the divergence on (a window)
  // The two differing values: the first tokens of prompt_after and cached_after before the
  // sides agree again (-1: they agree by content, not in step; see kv/near_miss.h).
  int prompt_differs = -1;
  int cached_differs = -1;
};

// The longest cached run of a sequence's blocks, found by match() and used by attach().
struct PrefixMatch {
  std::vector<uint64_t> hashes;
  std::vector<int32_t> ram_blocks;  // per block: its pool block, or -1 when in the tier
  int32_t tier_blocks = 0;          // blocks attach() imports (new pool blocks)
  int32_t revived_blocks = 0;       // RAM blocks now free-but-cached (leave the free count)
  int blocks() const { return static_cast<int>(hashes.size()); }
  // What attaching takes from PagedKvStore::free_blocks().
  int32_t free_blocks_taken() const { return tier_blocks + revived_blocks; }
};

class PrefixCache {
 public:
  // `identity` names the model and KV layout (hashes and offloaded files carry it).
  // Installs itself as the pool's eviction listener; `tier` may be null.
  PrefixCache(PagedKvStore& kv, uint64_t identity, std::unique_ptr<OffloadTier> tier);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  uint64_t identity() const { return identity_; }

  // Chains. `chain` keys the K/V of sequences that compute differently on the same tokens (a
  // LoRA adapter's key, engine/model_identity.h's adapter_identity); 0 is the model alone.
  // Blocks of different chains never match, and explanations of a miss look within the
  // sequence's chain only. Every call about one sequence passes its chain.
  int block_size() const { return kv_.block_size(); }
  OffloadTier* tier() { return tier_.get(); }

  // Hashes the full blocks of `tokens` not hashed yet (see extend_block_hashes).
  void extend_hashes(std::span<const int32_t> tokens, std::vector<uint64_t>& hashes,
                     uint64_t chain = 0) const;

  // The longest run of cached blocks at the start of `tokens`, never covering its last
  // token. `hashes` are the sequence's block hashes (at least its full blocks).
  PrefixMatch match(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                    uint64_t chain = 0) const;

  // Puts the matched blocks at the start of sequence kv_id (which holds no positions),
  // importing tier blocks, then the leading tokens a following cached block shares with
  // the prompt (copied into one new block, when a block is free), and counts the admission.
  // Returns the positions now held: fewer than the match when a tier block fails its
  // checks, up to a block more with a partial copy. Needs match.free_blocks_taken() free
  // blocks. When the sequence could have reused more, records why (take_divergences), unless
  // `explain_miss` is false (a preempted sequence coming back: its tokens hold its output).
  int attach(int32_t kv_id, const PrefixMatch& match, std::span<const int32_t> tokens,
             std::span<const uint64_t> hashes, uint64_t request_id, bool explain_miss = true,
             uint64_t chain = 0);

  // Registers the sequence's computed full blocks, from block `*registered` on, so others
  // can share them; advances *registered. Call before the sequence is released.
  void cache_blocks(int32_t kv_id, std::span<const uint64_t> hashes, int num_computed,
                    std::span<const int32_t> tokens, int* registered, uint64_t chain = 0);

  // Blocks another store computed (a prefill rank's, under disaggregation): the first
  // hashes.size() full blocks of `tokens`, `blocks` holding their bytes one block after the
  // other (the layout's block_bytes each). Each hash is checked against the one this cache
  // computes from `tokens` (another model or layout, or a corrupt frame, stops the adoption
  // there); a block is copied into a pool block and registered as an evictable cached block,
  // so the next match() of these tokens hits it. Already cached blocks are kept as they are.
  // Stops early when the pool has no block left. Returns how many leading blocks are now
  // cached. The blocks may be evicted like any cached block before a match takes them.
  int adopt(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
            std::span<const uint8_t> blocks);

  // Divergences recorded since the last call (oldest first, at most a few dozen).
  std::vector<PrefixDivergence> take_divergences();
  PrefixCacheStats stats() const;

 private:
  struct CachedBlock {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    int32_t ram_block = -1;  // pool block holding it, -1 when not in RAM
    bool in_tier = false;
  };

  // Token-granular reuse inside the first block that differs (the shared part of a prompt
  // rarely ends on a block boundary): the cached RAM block that follows `parent` and shares
  // the most leading tokens with tokens[positions..] lends those slots, copied into a new
  // block of the sequence (the rest of that block differs). Returns the positions added.
  int copy_partial_block(int32_t kv_id, uint64_t parent, std::span<const int32_t> tokens,
                         int positions);
  void add_entry(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  void erase_entry(uint64_t hash);
  void on_pool_evict(int32_t block, uint64_t hash);
  void on_tier_drop(uint64_t hash);
  std::optional<PrefixDivergence> explain(std::span<const int32_t> tokens,
                                          std::span<const uint64_t> hashes, int reused_blocks,
                                          int reused_tokens, uint64_t request_id,
                                          uint64_t chain) const;
  // A chain's extra key (the identity itself for chain 0) and its first block's parent.
  uint64_t key_of(uint64_t chain) const;
  uint64_t root_of(uint64_t chain) const {
    return chain == 0 ? root_ : root_block_hash(key_of(chain));
  }

  PagedKvStore& kv_;
  uint64_t identity_;
  uint64_t root_;
  std::unique_ptr<OffloadTier> tier_;
  std::unordered_map<uint64_t, CachedBlock> blocks_;
  std::unordered_multimap<uint64_t, uint64_t> children_;  // parent hash -> child hashes
  std::vector<uint8_t> scratch_;                          // one block, for tier loads
  std::vector<PrefixDivergence> divergences_;
  uint64_t ram_entries_ = 0;  // directory entries with a pool block
  PrefixCacheStats stats_;
};

}  // namespace rapide
