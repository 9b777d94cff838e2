#include "kv/paged_kv_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/attention_value_weights.h"
#include "kv/memory_budget.h"

namespace rapide {

PagedKvStore::PagedKvStore(const KvLayout& layout, int32_t n_blocks, int max_context,
                           KvLayoutMode mode)
    : pool_(layout, n_blocks), max_context_(max_context), mode_(mode) {
  if (layout.block_size < 1) fail(ErrorCode::kInvalidArgument, "KV block size must be >= 1");
  if (max_context < 1) fail(ErrorCode::kInvalidArgument, "KV max context must be >= 1");
}

std::unique_ptr<PagedKvStore> PagedKvStore::with_budget(const KvLayout& layout,
                                                        uint64_t budget_bytes, int max_context,
                                                        KvLayoutMode mode) {
  const int32_t n_blocks = BlockPool::blocks_for_budget(layout, budget_bytes);
  return std::make_unique<PagedKvStore>(layout, n_blocks, max_context, mode);
}

int32_t PagedKvStore::blocks_for(int n_positions, int block_size) {
  return static_cast<int32_t>((static_cast<int64_t>(n_positions) + block_size - 1) / block_size);
}

std::span<const int32_t> PagedKvStore::block_table(int32_t seq_id) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return {};
  return it->second.blocks;
}

int32_t PagedKvStore::blocks_for_new_sequence(int n_positions) const {
  if (mode_ == KvLayoutMode::kContiguous) return blocks_for(max_context_, block_size());
  const int32_t all = blocks_for(n_positions, block_size());
  return window_ > 0 ? std::min(all, window_blocks_) : all;
}

void PagedKvStore::set_sliding_window(int window, int step_positions) {
  if (window < 0 || step_positions < 1) {
    fail(ErrorCode::kInvalidArgument, "sliding window {} / step of {} positions is invalid", window,
         step_positions);
  }
  window_ = mode_ == KvLayoutMode::kPaged ? window : 0;
  // Before a reserve a sequence holds from the block first_block_read gives (at most
  // window - 1 positions back, less a value chunk's or a block's rounding) to its end; the
  // reserve adds up to a step, and the span may straddle one more block boundary.
  const int64_t span =
      static_cast<int64_t>(window) + step_positions + std::max(block_size(), kValueChunk);
  window_blocks_ = static_cast<int32_t>(
      std::min<int64_t>(INT32_MAX - 1, (span + block_size() - 1) / block_size()) + 1);
}

int32_t PagedKvStore::free_outside_window(int32_t seq_id, int next_position) {
  if (window_ == 0) return 0;
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return 0;
  Sequence& seq = it->second;
  // The next query sees next_position + 1 positions; later ones start no earlier.
  const int32_t keep = std::min(static_cast<int32_t>(seq.blocks.size()),
                                first_block_read(next_position + 1, window_, block_size()));
  const int32_t before = seq.freed;
  for (; seq.freed < keep; ++seq.freed) {
    pool_.free(seq.blocks[static_cast<size_t>(seq.freed)]);
    seq.blocks[static_cast<size_t>(seq.freed)] = kFreedBlock;
  }
  return seq.freed - before;
}

int32_t PagedKvStore::shared_blocks_to_write(const Sequence& seq, int n_positions) const {
  if (n_positions <= seq.positions) return 0;
  const size_t first = static_cast<size_t>(seq.positions / block_size());
  const size_t end =
      std::min(static_cast<size_t>(blocks_for(n_positions, block_size())), seq.blocks.size());
  int32_t shared = 0;
  for (size_t i = first; i < end; ++i) shared += pool_.ref_count(seq.blocks[i]) > 1 ? 1 : 0;
  return shared;
}

int32_t PagedKvStore::blocks_needed(int32_t seq_id, int n_positions) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    // What the first reserve allocates, not the windowed lifetime bound.
    return blocks_for(mode_ == KvLayoutMode::kContiguous ? max_context_ : n_positions,
                      block_size());
  }
  const Sequence& seq = it->second;
  int32_t extra = 0;
  if (mode_ == KvLayoutMode::kContiguous) {
    if (seq.blocks.empty()) extra = blocks_for_new_sequence(n_positions);
  } else {
    const int32_t have = static_cast<int32_t>(seq.blocks.size());
    extra = std::max(0, blocks_for(n_positions, block_size()) - have);
  }
  return extra + shared_blocks_to_write(seq, n_positions);
}

bool PagedKvStore::can_reserve(int32_t seq_id, int n_positions) const {
  if (n_positions < 0 || n_positions > max_context_) return false;
  return blocks_needed(seq_id, n_positions) <= free_blocks();
}

bool PagedKvStore::can_ever_fit(int n_positions) const {
  return n_positions >= 0 && n_positions <= max_context_ &&
         blocks_for_new_sequence(n_positions) <= total_blocks();
}

void PagedKvStore::check_positions(int32_t seq_id, int n_positions) const {
  if (n_positions < 0) {
    fail(ErrorCode::kInvalidArgument, "negative position count {} for sequence {}", n_positions,
         seq_id);
  }
  if (n_positions > max_context_) {
    fail(ErrorCode::kOutOfRange, "sequence {} needs {} positions, beyond the max context {}",
         seq_id, n_positions, max_context_);
  }
  const int32_t lifetime = blocks_for_new_sequence(n_positions);
  if (lifetime > total_blocks()) {
    fail(ErrorCode::kResourceExhausted,
         "sequence {} can never fit: {} positions need {} KV blocks ({}, {} layout) but the "
         "whole KV cache has {} ({}); raise --kv-memory or shorten the request",
         seq_id, n_positions, lifetime,
         format_bytes(static_cast<uint64_t>(lifetime) * pool_.block_bytes()),
         kv_layout_mode_name(mode_), total_blocks(), format_bytes(pool_.memory_bytes()));
  }
}

void PagedKvStore::make_writable(Sequence& seq, int n_positions) {
  if (n_positions <= seq.positions) return;
  const size_t first = static_cast<size_t>(seq.positions / block_size());
  const size_t end =
      std::min(static_cast<size_t>(blocks_for(n_positions, block_size())), seq.blocks.size());
  for (size_t i = first; i < end; ++i) {
    const int32_t block = seq.blocks[i];
    if (pool_.ref_count(block) > 1) {
      // Another user still reads this content: write into a private copy instead.
      const int32_t copy = pool_.allocate();
      std::memcpy(pool_.data(copy), pool_.data(block), pool_.block_bytes());
      note_op(KvOp::copy(block, copy));
      pool_.free(block);
      seq.blocks[i] = copy;
    } else if (pool_.has_hash(block)) {
      // Sole owner, but the content is about to stop matching its hash.
      pool_.clear_hash(block);
    }
  }
}

bool PagedKvStore::try_reserve(int32_t seq_id, int n_positions) {
  check_positions(seq_id, n_positions);
  if (blocks_needed(seq_id, n_positions) > free_blocks()) return false;
  Sequence& seq = sequences_[seq_id];
  make_writable(seq, n_positions);
  if (mode_ == KvLayoutMode::kContiguous) {
    if (seq.blocks.empty()) {
      const int32_t n = blocks_for_new_sequence(n_positions);
      seq.blocks.reserve(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) seq.blocks.push_back(pool_.allocate());
    }
  } else {
    const size_t target = static_cast<size_t>(blocks_for(n_positions, block_size()));
    while (seq.blocks.size() < target) seq.blocks.push_back(pool_.allocate());
  }
  seq.positions = std::max(seq.positions, n_positions);
  return true;
}

void PagedKvStore::reserve(int32_t seq_id, int n_positions) {
  if (try_reserve(seq_id, n_positions)) return;
  fail(ErrorCode::kResourceExhausted,
       "KV cache full: sequence {} needs {} more blocks to hold {} positions, {} of {} blocks "
       "are free",
       seq_id, blocks_needed(seq_id, n_positions), n_positions, free_blocks(), total_blocks());
}

void PagedKvStore::truncate(int32_t seq_id, int n_positions) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) {
    fail(ErrorCode::kInvalidArgument, "truncate of unknown KV sequence {}", seq_id);
  }
  Sequence& seq = it->second;
  if (n_positions < 0 || n_positions > seq.positions) {
    fail(ErrorCode::kInvalidArgument, "cannot truncate sequence {} from {} to {} positions", seq_id,
         seq.positions, n_positions);
  }
  if (seq.freed > 0 && first_block_read(n_positions + 1, window_, block_size()) < seq.freed) {
    fail(ErrorCode::kInvalidArgument,
         "cannot roll sequence {} back to {} positions: the sliding window already freed KV "
         "blocks that position reads",
         seq_id, n_positions);
  }
  if (mode_ == KvLayoutMode::kPaged) {
    const size_t keep = static_cast<size_t>(blocks_for(n_positions, block_size()));
    // Last block first, as in release(): cached tail blocks are the least likely to be
    // shared again, so they should be evicted before the prefix blocks.
    while (seq.blocks.size() > keep) {
      pool_.free(seq.blocks.back());
      seq.blocks.pop_back();
    }
  }
  seq.positions = n_positions;
}

void PagedKvStore::release(int32_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
    if (*b != kFreedBlock) pool_.free(*b);
  }
  sequences_.erase(it);
}

int PagedKvStore::positions(int32_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? 0 : it->second.positions;
}

int64_t PagedKvStore::wasted_positions(int32_t seq_id) const {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return 0;
  return static_cast<int64_t>(it->second.blocks.size()) * block_size() - it->second.positions;
}

uint64_t PagedKvStore::wasted_bytes(int32_t seq_id) const {
  return static_cast<uint64_t>(wasted_positions(seq_id)) * (pool_.block_bytes() / block_size());
}

KvUsage PagedKvStore::usage() const {
  KvUsage u;
  u.sequences = sequence_count();
  u.total_blocks = total_blocks();
  u.used_blocks = used_blocks();
  u.free_blocks = free_blocks();
  u.cached_free_blocks = pool_.cached_free_blocks();
  for (const auto& [id, seq] : sequences_) {
    const int64_t freed_positions = static_cast<int64_t>(seq.freed) * block_size();
    u.reserved_positions +=
        static_cast<int64_t>(seq.blocks.size()) * block_size() - freed_positions;
    u.used_positions += seq.positions - freed_positions;
  }
  u.wasted_bytes = static_cast<uint64_t>(u.reserved_positions - u.used_positions) *
                   (pool_.block_bytes() / block_size());
  return u;
}

void PagedKvStore::export_block(int32_t block, std::span<uint8_t> out) const {
  if (out.size() != pool_.block_bytes()) {
    fail(ErrorCode::kInvalidArgument, "KV block export needs {} bytes, got a {}-byte buffer",
         pool_.block_bytes(), out.size());
  }
  std::memcpy(out.data(), pool_.data(block), out.size());
}

std::vector<uint8_t> PagedKvStore::export_block(int32_t block) const {
  std::vector<uint8_t> bytes(pool_.block_bytes());
  export_block(block, bytes);
  return bytes;
}

int32_t PagedKvStore::import_block(std::span<const uint8_t> bytes) {
  if (bytes.size() != pool_.block_bytes()) {
    fail(ErrorCode::kInvalidArgument,
         "KV block import of {} bytes, but a block of this layout is {} bytes", bytes.size(),
         pool_.block_bytes());
  }
  const int32_t block = pool_.allocate();
  std::memcpy(pool_.data(block), bytes.data(), bytes.size());
  return block;
}

void PagedKvStore::append_blocks(int32_t seq_id, std::span<const int32_t> blocks, int n_positions) {
  if (mode_ != KvLayoutMode::kPaged) {
    fail(ErrorCode::kUnsupported, "appending shared KV blocks needs --kv-layout paged");
  }
  const int bs = block_size();
  const int64_t k = static_cast<int64_t>(blocks.size());
  if (n_positions <= (k - 1) * bs || n_positions > k * bs) {
    fail(ErrorCode::kInvalidArgument, "{} appended KV blocks cannot hold exactly {} positions", k,
         n_positions);
  }
  const int before = positions(seq_id);
  if (before % bs != 0) {
    fail(ErrorCode::kInvalidArgument,
         "sequence {} ends inside a block ({} positions); blocks can only be appended at a "
         "block boundary",
         seq_id, before);
  }
  check_positions(seq_id, before + n_positions);
  for (int32_t block : blocks) {
    if (pool_.ref_count(block) == 0 && !pool_.has_hash(block)) {
      fail(ErrorCode::kInvalidArgument, "KV block {} is free and holds no cached content", block);
    }
  }
  Sequence& seq = sequences_[seq_id];
  for (int32_t block : blocks) {
    pool_.touch(block);
    seq.blocks.push_back(block);
  }
  seq.positions = before + n_positions;
}

void PagedKvStore::record_ops(bool on) {
  recording_ = on;
  if (!on) pending_ops_.clear();
}

std::vector<KvOp> PagedKvStore::take_ops() {
  std::vector<KvOp> out;
  out.swap(pending_ops_);
  return out;
}

void PagedKvStore::check_no_leaks() const {
  if (!sequences_.empty()) {
    std::string ids;
    for (const auto& [id, seq] : sequences_) ids += fmt::format(" {}", id);
    fail(ErrorCode::kInternal, "{} KV sequences were never released:{}", sequences_.size(), ids);
  }
  pool_.check_no_leaks();
}

}  // namespace rapide
