#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/kv_rows.h"
#include "kv/block_hash.h"
#include "kv/near_miss.h"

namespace rapide {

namespace {
// Divergence records waiting for the engine; older ones are dropped beyond this.
constexpr size_t kMaxPendingDivergences = 64;
// Tokens kept on each side of a divergence after the differing values: enough for a
// readable line of text.
constexpr size_t kWindowTokens = 16;
// Tokens after a divergence compared with a cached chain (kv/near_miss.h), and how many
// cached chains are compared: those sharing the most leading tokens.
constexpr size_t kCompareTokens = 1024;
constexpr size_t kMaxCandidates = 16;
}  // namespace

PrefixCache::PrefixCache(PagedKvStore& kv, uint64_t identity, std::unique_ptr<OffloadTier> tier)
    : kv_(kv), identity_(identity), root_(root_block_hash(identity)), tier_(std::move(tier)) {
  if (kv_.mode() != KvLayoutMode::kPaged) {
    fail(ErrorCode::kUnsupported, "prefix caching needs --kv-layout paged");
  }
  kv_.pool().set_eviction_listener(
      [this](int32_t block, uint64_t hash) { on_pool_evict(block, hash); });
  if (tier_) {
    tier_->set_drop_listener([this](uint64_t hash) { on_tier_drop(hash); });
    // Blocks a previous run left on disk join the directory as tier-resident.
    for (const OffloadedBlockMeta& meta : tier_->found()) {
      if (static_cast<int>(meta.tokens.size()) != block_size()) continue;
      add_entry(meta.hash, meta.parent, meta.tokens);
      blocks_[meta.hash].in_tier = true;
    }
    scratch_.resize(kv_.pool().block_bytes());
  }
}

PrefixCache::~PrefixCache() {
  kv_.pool().set_eviction_listener(nullptr);
  if (tier_) tier_->set_drop_listener(nullptr);
}

uint64_t PrefixCache::key_of(uint64_t chain) const {
  if (chain == 0) return identity_;
  const int32_t words[2] = {static_cast<int32_t>(chain), static_cast<int32_t>(chain >> 32)};
  return hash_block_tokens(identity_, chain, words);
}

void PrefixCache::extend_hashes(std::span<const int32_t> tokens, std::vector<uint64_t>& hashes,
                                uint64_t chain) const {
  extend_block_hashes(tokens, block_size(), key_of(chain), hashes);
}

void PrefixCache::add_entry(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  CachedBlock& e = blocks_[hash];
  e.parent = parent;
  e.tokens.assign(tokens.begin(), tokens.end());
  children_.emplace(parent, hash);
}

void PrefixCache::erase_entry(uint64_t hash) {
  auto it = blocks_.find(hash);
  if (it == blocks_.end()) return;
  auto [first, last] = children_.equal_range(it->second.parent);
  for (auto c = first; c != last; ++c) {
    if (c->second == hash) {
      children_.erase(c);
      break;
    }
  }
  blocks_.erase(it);
}

void PrefixCache::on_pool_evict(int32_t block, uint64_t hash) {
  auto it = blocks_.find(hash);
  if (it == blocks_.end() || it->second.ram_block != block) return;
  stats_.evicted_blocks++;
  if (tier_ && !it->second.in_tier) {
    // The pool calls before reusing the memory: the bytes are still this block's K/V.
    OffloadedBlockMeta meta{hash, it->second.parent, it->second.tokens};
    tier_->store(meta, std::span<const uint8_t>(kv_.pool().data(block), kv_.pool().block_bytes()));
    if (kv_.recording_ops()) {
      kv_.note_op(KvOp::offload(block, hash, it->second.parent, it->second.tokens));
    }
  }
  // store() may have dropped other entries, never this one's iterator (no insertion).
  it->second.in_tier = tier_ && tier_->contains(hash);
  it->second.ram_block = -1;
  --ram_entries_;
  if (!it->second.in_tier) erase_entry(hash);
}

void PrefixCache::on_tier_drop(uint64_t hash) {
  // Tiers that mirror this one (tensor/pipeline followers', a replay's) let it go too.
  if (kv_.recording_ops()) kv_.note_op(KvOp::forget(hash));
  auto it = blocks_.find(hash);
  if (it == blocks_.end()) return;
  it->second.in_tier = false;
  if (it->second.ram_block < 0) erase_entry(hash);
}

PrefixMatch PrefixCache::match(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                               uint64_t chain) const {
  PrefixMatch m;
  if (tokens.empty()) return m;
  const size_t bs = static_cast<size_t>(block_size());
  // The last token is always computed: its logits start the generation.
  const size_t max_blocks = std::min(hashes.size(), (tokens.size() - 1) / bs);
  uint64_t parent = root_of(chain);
  for (size_t b = 0; b < max_blocks; ++b) {
    auto it = blocks_.find(hashes[b]);
    if (it == blocks_.end()) break;
    const CachedBlock& e = it->second;
    const auto mine = tokens.subspan(b * bs, bs);
    if (e.parent != parent ||
        !std::equal(mine.begin(), mine.end(), e.tokens.begin(), e.tokens.end())) {
      break;  // a hash collision: never serve another prefix's K/V
    }
    if (e.ram_block >= 0) {
      if (kv_.pool().ref_count(e.ram_block) == 0) m.revived_blocks++;
      m.ram_blocks.push_back(e.ram_block);
    } else if (e.in_tier) {
      m.ram_blocks.push_back(-1);
      m.tier_blocks++;
    } else {
      break;
    }
    m.hashes.push_back(hashes[b]);
    parent = hashes[b];
  }
  return m;
}

int PrefixCache::attach(int32_t kv_id, const PrefixMatch& m, std::span<const int32_t> tokens,
                        std::span<const uint64_t> hashes, uint64_t request_id, bool explain_miss,
                        uint64_t chain) {
  if (kv_.positions(kv_id) != 0) {
    fail(ErrorCode::kInternal, "prefix attach to sequence {} that already holds positions", kv_id);
  }
  BlockPool& pool = kv_.pool();
  // Blocks the tier's worker dropped since the last call leave the directory first.
  if (tier_) tier_->deliver_drops();
  // Pin the RAM blocks first, so importing tier blocks (which allocates, and may evict
  // the least recently used cached block) cannot take one of them.
  for (int32_t b : m.ram_blocks) {
    if (b >= 0) pool.touch(b);
  }
  if (tier_) {
    for (size_t i = 0; i < m.hashes.size(); ++i) {
      if (m.ram_blocks[i] < 0) tier_->pin(m.hashes[i]);
    }
  }
  std::vector<int32_t> table;
  std::vector<int32_t> imported;
  int ram_blocks = 0;
  for (size_t i = 0; i < m.hashes.size(); ++i) {
    if (m.ram_blocks[i] >= 0) {
      table.push_back(m.ram_blocks[i]);
      ++ram_blocks;
      continue;
    }
    if (!tier_ || !tier_->load(m.hashes[i], scratch_)) break;  // corrupt: recompute from here
    const int32_t block = kv_.import_block(scratch_);
    kv_.note_op(KvOp::restore(block, m.hashes[i]));
    imported.push_back(block);
    table.push_back(block);
    auto it = blocks_.find(m.hashes[i]);
    if (it != blocks_.end() && it->second.ram_block < 0) {
      it->second.ram_block = block;
      ++ram_entries_;
      pool.set_hash(block, m.hashes[i]);
    }
  }
  if (tier_) tier_->unpin_all();
  const int bs = block_size();
  const int positions = static_cast<int>(table.size()) * bs;
  if (!table.empty()) kv_.append_blocks(kv_id, table, positions);
  // The table holds its own references now; drop the pins and the import references.
  for (int32_t b : m.ram_blocks) {
    if (b >= 0) pool.free(b);
  }
  for (int32_t b : imported) pool.free(b);
  // Past the last whole block, the next cached block may still start like the prompt.
  // Only behind a whole matched block: a prompt that differs inside its first block is a
  // miss (a few shared leading tokens, like BOS, are not worth a copy).
  int partial = 0;
  if (!table.empty() && table.size() == m.hashes.size()) {
    partial = copy_partial_block(kv_id, m.hashes[table.size() - 1], tokens, positions);
  }
  const int held = positions + partial;

  const int ram_tokens = std::min(ram_blocks, static_cast<int>(table.size())) * bs + partial;
  stats_.queries++;
  stats_.hits += held > 0 ? 1 : 0;
  stats_.prompt_tokens += tokens.size();
  stats_.ram_hit_tokens += ram_tokens;
  stats_.tier_hit_tokens += held - ram_tokens;
  stats_.computed_tokens += tokens.size() - held;
  if (!explain_miss) return held;
  if (auto d = explain(tokens, hashes, static_cast<int>(table.size()), held, request_id, chain)) {
    stats_.miss_records++;
    if (divergences_.size() >= kMaxPendingDivergences) divergences_.erase(divergences_.begin());
    divergences_.push_back(std::move(*d));
  }
  return held;
}

int PrefixCache::copy_partial_block(int32_t kv_id, uint64_t parent, std::span<const int32_t> tokens,
                                    int positions) {
  const int bs = block_size();
  // At most the rest of one block, and never the prompt's last token (its logits are due).
  const int limit = std::min(bs, static_cast<int>(tokens.size()) - 1 - positions);
  if (limit <= 0) return 0;
  int best = 0;
  int32_t source = -1;
  const auto [first, last] = children_.equal_range(parent);
  for (auto it = first; it != last; ++it) {
    const auto entry = blocks_.find(it->second);
    if (entry == blocks_.end() || entry->second.ram_block < 0) continue;
    const std::vector<int32_t>& cached = entry->second.tokens;
    int n = 0;
    while (n < limit && n < static_cast<int>(cached.size()) &&
           cached[static_cast<size_t>(n)] == tokens[static_cast<size_t>(positions + n)]) {
      ++n;
    }
    if (n > best) {
      best = n;
      source = entry->second.ram_block;
    }
  }
  if (best == 0) return 0;
  BlockPool& pool = kv_.pool();
  pool.touch(source);  // pinned: taking the new block must not evict the one copied from
  int copied = 0;
  if (kv_.try_reserve(kv_id, positions + best)) {
    const int32_t target = kv_.block_table(kv_id)[static_cast<size_t>(positions / bs)];
    copy_kv_slots(kv_.layout(), kv_.block_data(source), kv_.block_data(target), best);
    kv_.note_op(KvOp::copy_slots(source, target, best));
    copied = best;
  }
  pool.free(source);
  return copied;
}

std::optional<PrefixDivergence> PrefixCache::explain(std::span<const int32_t> tokens,
                                                     std::span<const uint64_t> hashes,
                                                     int reused_blocks, int reused_tokens,
                                                     uint64_t request_id, uint64_t chain) const {
  const size_t bs = static_cast<size_t>(block_size());
  const size_t k = static_cast<size_t>(reused_blocks);
  const size_t max_blocks = tokens.empty() ? 0 : std::min(hashes.size(), (tokens.size() - 1) / bs);
  if (k >= max_blocks) return std::nullopt;  // reused all it could
  // The cached blocks that follow the reused run are the candidates, the ones sharing the
  // most leading tokens with the prompt's next block first. Sharing none is no reason to
  // skip one: a value at the very start of a prompt, or right on a block boundary, differs
  // from the first token of the block on.
  const uint64_t parent = k == 0 ? root_of(chain) : hashes[k - 1];
  const auto next = tokens.subspan(k * bs, bs);
  struct Candidate {
    uint64_t hash;
    size_t common;
  };
  std::vector<Candidate> candidates;
  auto [first, last] = children_.equal_range(parent);
  for (auto c = first; c != last; ++c) {
    const CachedBlock& e = blocks_.at(c->second);
    const size_t common = static_cast<size_t>(
        std::mismatch(next.begin(), next.end(), e.tokens.begin(), e.tokens.end()).first -
        next.begin());
    if (common < bs) candidates.push_back({c->second, common});  // an equal one would match
  }
  // Nothing cached follows this prefix: a new prompt, not a near miss.
  if (candidates.empty()) return std::nullopt;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.common > b.common; });
  if (candidates.size() > kMaxCandidates) candidates.resize(kMaxCandidates);

  for (const Candidate& cand : candidates) {
    const size_t matched = k * bs + cand.common;
    const size_t prompt_end = std::min(tokens.size(), matched + kCompareTokens);
    const auto prompt_after = tokens.subspan(matched, prompt_end - matched);
    // The cached side: the rest of the candidate block, then down its chain while there is one.
    const CachedBlock& block = blocks_.at(cand.hash);
    std::vector<int32_t> cached(block.tokens.begin() + static_cast<std::ptrdiff_t>(cand.common),
                                block.tokens.end());
    uint64_t at = cand.hash;
    while (cached.size() < kCompareTokens) {
      auto child = children_.find(at);
      if (child == children_.end()) break;
      at = child->second;
      const CachedBlock& e = blocks_.at(at);
      cached.insert(cached.end(), e.tokens.begin(), e.tokens.end());
    }
    // A prompt that simply goes on differently (a new question after a shared system
    // prompt) reused all it could: no record.
    const NearMiss near = compare_after_divergence(prompt_after, cached);
    if (!near.near) continue;
    PrefixDivergence d;
    d.request_id = request_id;
    d.prompt_tokens = static_cast<int>(tokens.size());
    d.reused_tokens = reused_tokens;
    d.matched_tokens = static_cast<int>(matched);
    d.common.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(matched));
    // Windows long enough to hold both values and a little text after them.
    const size_t prompt_window =
        kWindowTokens + static_cast<size_t>(std::max(near.prompt_differs, 0));
    const size_t cached_window =
        kWindowTokens + static_cast<size_t>(std::max(near.cached_differs, 0));
    d.prompt_after.assign(prompt_after.begin(),
                          prompt_after.begin() + static_cast<std::ptrdiff_t>(
                                                     std::min(prompt_after.size(), prompt_window)));
    cached.resize(std::min(cached.size(), cached_window));
    d.cached_after = std::move(cached);
    d.prompt_differs = near.prompt_differs;
    d.cached_differs = near.cached_differs;
    return d;
  }
  return std::nullopt;
}

void PrefixCache::cache_blocks(int32_t kv_id, std::span<const uint64_t> hashes, int num_computed,
                               std::span<const int32_t> tokens, int* registered, uint64_t chain) {
  const std::span<const int32_t> table = kv_.block_table(kv_id);
  const size_t bs = static_cast<size_t>(block_size());
  const size_t full = std::min(
      {static_cast<size_t>(num_computed) / bs, hashes.size(), table.size(), tokens.size() / bs});
  BlockPool& pool = kv_.pool();
  for (size_t b = static_cast<size_t>(*registered); b < full; ++b) {
    const int32_t block = table[b];
    const uint64_t hash = hashes[b];
    if (block == kFreedBlock) continue;  // left the sliding window before it was registered
    if (pool.has_hash(block)) continue;  // a shared hit: already registered
    auto it = blocks_.find(hash);
    if (it != blocks_.end() && it->second.ram_block >= 0) {
      // Computed twice (two requests with one prefix in flight together): the first copy
      // stays the cached one, this one is freed normally with its sequence.
      continue;
    }
    if (it == blocks_.end())
      add_entry(hash, b == 0 ? root_of(chain) : hashes[b - 1], tokens.subspan(b * bs, bs));
    blocks_[hash].ram_block = block;
    ++ram_entries_;
    pool.set_hash(block, hash);
  }
  *registered = static_cast<int>(std::max(full, static_cast<size_t>(*registered)));
}

int PrefixCache::adopt(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                       std::span<const uint8_t> blocks) {
  const size_t bs = static_cast<size_t>(block_size());
  const size_t block_bytes = kv_.pool().block_bytes();
  const size_t n = std::min({hashes.size(), tokens.size() / bs, blocks.size() / block_bytes});
  // The hashes this cache gives these tokens: a frame is trusted for bytes, never for names.
  std::vector<uint64_t> expected;
  extend_hashes(tokens.first(n * bs), expected);
  BlockPool& pool = kv_.pool();
  std::vector<int32_t> held;  // pinned until the end: a later import must not evict them
  size_t b = 0;
  for (; b < n; ++b) {
    const uint64_t hash = hashes[b];
    if (hash != expected[b]) break;
    auto it = blocks_.find(hash);
    if (it != blocks_.end() && it->second.ram_block >= 0) {
      pool.touch(it->second.ram_block);
      held.push_back(it->second.ram_block);
      continue;
    }
    if (pool.free_blocks() == 0) break;
    const std::span<const uint8_t> bytes = blocks.subspan(b * block_bytes, block_bytes);
    const int32_t block = kv_.import_block(bytes);
    if (kv_.recording_ops()) {
      kv_.note_op(KvOp::import(
          block, std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end())));
    }
    held.push_back(block);
    // Looked up again: importing may evict a cached block, which may drop entries.
    if (blocks_.find(hash) == blocks_.end()) {
      add_entry(hash, b == 0 ? root_ : hashes[b - 1], tokens.subspan(b * bs, bs));
    }
    blocks_[hash].ram_block = block;
    ++ram_entries_;
    pool.set_hash(block, hash);
    stats_.adopted_blocks++;
  }
  for (int32_t block : held) pool.free(block);  // cached, evictable, until a match takes it
  return static_cast<int>(b);
}

std::vector<PrefixDivergence> PrefixCache::take_divergences() {
  std::vector<PrefixDivergence> out;
  out.swap(divergences_);
  return out;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.cached_blocks = blocks_.size();
  s.ram_cached_blocks = ram_entries_;
  s.offload_enabled = tier_ != nullptr;
  if (tier_) s.offload = tier_->stats();
  return s;
}

}  // namespace rapide
