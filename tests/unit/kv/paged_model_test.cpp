// The paged KV cache under a real model (stories260K): whatever the block size, budget,
// layout, interleaving of sequences' blocks, rollbacks or block transfers between stores,
// attention must compute exactly what it computes over ContiguousKvStore. Blocks a prefix
// cache adopts from another store (prefill/decode disaggregation) are hit and decode exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/kv_rows.h"
#include "kv/block_hash.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "test_paths.h"

namespace rapide {
namespace {

constexpr int kNewTokens = 100;
constexpr int kBlockSize = 16;

// Fixed token ids (BOS first) so the test does not depend on the tokenizer.
const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 403, 407, 261, 378, 429, 13, 300},
    {1, 88, 95, 120},
    {1, 500, 12, 44, 380, 390, 401, 402, 310, 77, 76, 75, 74, 300, 301, 302, 303, 304, 305},
    {1},
};

struct Generation {
  std::vector<int32_t> tokens;             // generated, one per step
  std::vector<std::vector<float>> logits;  // the logits each token was picked from
};

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

class PagedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    const std::string path = testing::shared_path("models/stories260K/stories260K.gguf");
    file_ = std::make_shared<const ModelFile>(load_model(path));
    model_ = std::make_unique<Model>(file_);
  }

  KvLayout layout() const {
    return KvLayout::for_model(model_->config(), kBlockSize, KvType::kF16);
  }
  int max_context() const { return model_->config().max_context; }

  // Greedy decoding of several prompts together (one batch per step). `prepare(seq, n)` runs
  // before each forward pass for each sequence that will hold n positions after it.
  std::vector<Generation> generate(KvStore& kv, const std::vector<std::vector<int32_t>>& prompts,
                                   int n_new, const std::function<void(int32_t, int)>& prepare) {
    return generate(*model_, kv, prompts, n_new, prepare);
  }
  std::vector<Generation> generate(Model& model, KvStore& kv,
                                   const std::vector<std::vector<int32_t>>& prompts, int n_new,
                                   const std::function<void(int32_t, int)>& prepare) {
    const int n = static_cast<int>(prompts.size());
    std::vector<Generation> out(n);
    Batch batch;
    for (int s = 0; s < n; ++s) {
      prepare(s, static_cast<int>(prompts[s].size()));
      for (size_t p = 0; p < prompts[s].size(); ++p) {
        batch.add(prompts[s][p], s, static_cast<int>(p), p + 1 == prompts[s].size());
      }
    }
    for (int step = 0; step < n_new; ++step) {
      std::span<const float> logits = model.forward(batch, kv, pool_);
      const int vocab = model.config().vocab_size;
      batch.clear();
      for (int s = 0; s < n; ++s) {
        std::span<const float> row = logits.subspan(static_cast<size_t>(s) * vocab, vocab);
        out[s].logits.emplace_back(row.begin(), row.end());
        out[s].tokens.push_back(argmax(row));
        const int pos = static_cast<int>(prompts[s].size()) + step;
        if (step + 1 < n_new) {
          prepare(s, pos + 1);
          batch.add(out[s].tokens.back(), s, pos, true);
        }
      }
    }
    return out;
  }

  Generation contiguous_reference(const std::vector<int32_t>& prompt) {
    ContiguousKvStore kv(model_->config(), 1, static_cast<int>(prompt.size()) + kNewTokens + 1);
    return generate(kv, {prompt}, kNewTokens, [](int32_t, int) {})[0];
  }

  static void expect_same(const Generation& a, const Generation& b, size_t from = 0) {
    ASSERT_EQ(a.tokens.size(), b.tokens.size());
    for (size_t i = from; i < a.tokens.size(); ++i) {
      ASSERT_EQ(a.tokens[i], b.tokens[i]) << "token " << i;
      ASSERT_EQ(0, std::memcmp(a.logits[i].data(), b.logits[i].data(),
                               a.logits[i].size() * sizeof(float)))
          << "logits of token " << i << " differ";
    }
  }

  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<Model> model_;
  ThreadPool pool_{2};
};

TEST_F(PagedModelTest, PagedAndContiguousLayoutsGiveIdenticalTokens) {
  const std::vector<int32_t>& prompt = kPrompts[0];
  const Generation reference = contiguous_reference(prompt);
  // A budget of exactly the blocks this generation needs: any leak or over-reservation
  // would make a reserve fail.
  const int positions = static_cast<int>(prompt.size()) + kNewTokens - 1;
  const int32_t n_blocks = (positions + kBlockSize - 1) / kBlockSize;
  for (KvLayoutMode mode : {KvLayoutMode::kPaged, KvLayoutMode::kContiguous}) {
    SCOPED_TRACE(kv_layout_mode_name(mode));
    const int context = mode == KvLayoutMode::kPaged ? max_context() : positions;
    PagedKvStore kv(layout(), n_blocks, context, mode);
    const Generation paged =
        generate(kv, {prompt}, kNewTokens, [&](int32_t s, int n) { kv.reserve(s, n); })[0];
    expect_same(reference, paged);
    EXPECT_EQ(kv.free_blocks(), 0);
    EXPECT_LT(kv.wasted_positions(0), kBlockSize);
    kv.release(0);
    kv.check_no_leaks();
  }
}

TEST_F(PagedModelTest, ConcurrentSequencesWithInterleavedBlocksMatchTheirSoloRuns) {
  PagedKvStore kv(layout(), 64, max_context());
  const std::vector<Generation> together =
      generate(kv, kPrompts, kNewTokens, [&](int32_t s, int n) { kv.reserve(s, n); });
  // Sequences grew in lock-step, so their tables interleave in the pool.
  EXPECT_NE(kv.block_table(0)[1], kv.block_table(0)[0] + 1);
  for (size_t s = 0; s < kPrompts.size(); ++s) {
    SCOPED_TRACE(s);
    expect_same(contiguous_reference(kPrompts[s]), together[s]);
    kv.release(static_cast<int32_t>(s));
  }
  kv.check_no_leaks();
}

TEST_F(PagedModelTest, RollingBackRejectedDraftTokensRestoresTheExactState) {
  const std::vector<int32_t>& prompt = kPrompts[2];
  const int plen = static_cast<int>(prompt.size());
  const Generation reference = contiguous_reference(prompt);
  PagedKvStore kv(layout(), 16, max_context());
  generate(kv, {prompt}, 60, [&](int32_t s, int n) { kv.reserve(s, n); });

  // Keep the prompt and the first 30 generated tokens (mid-block), as a speculative step
  // would after rejecting a draft, then write 9 wrong draft tokens across a block boundary.
  const int keep = plen + 30;
  const int32_t blocks_before = kv.used_blocks();
  kv.truncate(0, keep);
  EXPECT_LT(kv.used_blocks(), blocks_before);
  kv.reserve(0, keep + 9);
  Batch batch;
  for (int i = 0; i < 9; ++i) batch.add(7 + i, 0, keep + i, true);
  model_->forward(batch, kv, pool_);
  kv.truncate(0, keep);

  // Continuing with the right tokens must give bit-identical logits.
  for (int i = 30; i + 1 < kNewTokens; ++i) {
    kv.reserve(0, plen + i + 1);
    batch.clear();
    batch.add(reference.tokens[i], 0, plen + i, true);
    std::span<const float> logits = model_->forward(batch, kv, pool_);
    ASSERT_EQ(0, std::memcmp(logits.data(), reference.logits[i + 1].data(),
                             logits.size() * sizeof(float)))
        << "logits of token " << i + 1 << " differ after the rollback";
  }
  kv.release(0);
  kv.check_no_leaks();
}

TEST_F(PagedModelTest, BlocksExportedAfterPrefillDecodeIdenticallyInAnotherStore) {
  const std::vector<int32_t>& prompt = kPrompts[2];
  const int plen = static_cast<int>(prompt.size());
  const Generation reference = contiguous_reference(prompt);

  // "Prefill machine": run the prompt, keep the first token's logits, export the blocks.
  PagedKvStore prefill(layout(), 8, max_context());
  const Generation first =
      generate(prefill, {prompt}, 1, [&](int32_t s, int n) { prefill.reserve(s, n); })[0];
  std::vector<std::vector<uint8_t>> wire;
  for (int32_t block : prefill.block_table(0)) wire.push_back(prefill.export_block(block));
  prefill.release(0);
  prefill.check_no_leaks();

  // "Decode machine": a different pool (other block ids), the blocks imported into slot 3.
  PagedKvStore decode(layout(), 16, max_context());
  decode.reserve(9, 40);  // occupy low block ids so the imported ones land elsewhere
  std::vector<int32_t> imported;
  for (const auto& bytes : wire) imported.push_back(decode.import_block(bytes));
  decode.append_blocks(3, imported, plen);
  for (int32_t block : imported) decode.pool().free(block);
  decode.release(9);

  Generation continued = first;
  Batch batch;
  for (int i = 0; i + 1 < kNewTokens; ++i) {
    decode.reserve(3, plen + i + 1);
    batch.clear();
    batch.add(continued.tokens.back(), 3, plen + i, true);
    std::span<const float> logits = model_->forward(batch, decode, pool_);
    continued.logits.emplace_back(logits.begin(), logits.end());
    continued.tokens.push_back(argmax(logits));
  }
  expect_same(reference, continued);
  decode.release(3);
  decode.check_no_leaks();
}

// Disaggregation's path in one process: a "prefill rank" store computes a prompt's full
// blocks, the "decode rank" cache adopts them with their hashes, its next match hits them,
// and only the rest of the prompt is computed there: the same tokens and logits, bit for bit.
TEST_F(PagedModelTest, PrefixCacheAdoptsBlocksOfAnotherStoreAndHitsThemExactly) {
  std::vector<int32_t> prompt = kPrompts[2];
  prompt.insert(prompt.end(), kPrompts[0].begin() + 1, kPrompts[0].end());
  prompt.insert(prompt.end(), kPrompts[2].begin() + 1, kPrompts[2].end());
  const int plen = static_cast<int>(prompt.size());
  const int blocks = (plen - 1) / kBlockSize;
  ASSERT_EQ(blocks, 2);
  const Generation reference = contiguous_reference(prompt);
  const uint64_t identity = 0x5eed;

  PagedKvStore prefill(layout(), 8, max_context());
  prefill.reserve(0, blocks * kBlockSize);
  Batch batch;
  for (int p = 0; p < blocks * kBlockSize; ++p) batch.add(prompt[p], 0, p, false);
  model_->forward(batch, prefill, pool_);
  std::vector<uint64_t> hashes;
  extend_block_hashes(std::span<const int32_t>(prompt).first(blocks * kBlockSize), kBlockSize,
                      identity, hashes);
  std::vector<uint8_t> bytes;
  for (int32_t block : prefill.block_table(0)) {
    const std::vector<uint8_t> one = prefill.export_block(block);
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  prefill.release(0);

  PagedKvStore decode(layout(), 16, max_context());
  decode.reserve(9, 40);  // other block ids than the prefill store's
  PrefixCache cache(decode, identity, nullptr);
  // A hash this cache would not give the tokens (another model, a corrupt frame) stops the
  // adoption at that block; so do blocks of another prompt.
  std::vector<uint64_t> wrong = hashes;
  wrong[1] ^= 1;
  EXPECT_EQ(cache.adopt(prompt, wrong, bytes), 1);
  std::vector<int32_t> other = prompt;
  other[3] += 1;
  EXPECT_EQ(cache.adopt(other, hashes, bytes), 0);
  EXPECT_EQ(cache.adopt(prompt, hashes, bytes), blocks);
  EXPECT_EQ(cache.stats().adopted_blocks, 2u);
  decode.release(9);

  std::vector<uint64_t> mine;
  cache.extend_hashes(prompt, mine);
  const PrefixMatch match = cache.match(prompt, mine);
  ASSERT_EQ(match.blocks(), blocks);
  ASSERT_EQ(cache.attach(3, match, prompt, mine, 1), blocks * kBlockSize);

  Generation continued;
  decode.reserve(3, plen);
  batch.clear();
  for (int p = blocks * kBlockSize; p < plen; ++p) batch.add(prompt[p], 3, p, p + 1 == plen);
  for (int i = 0; i < kNewTokens; ++i) {
    std::span<const float> logits = model_->forward(batch, decode, pool_);
    continued.logits.emplace_back(logits.begin(), logits.end());
    continued.tokens.push_back(argmax(logits));
    decode.reserve(3, plen + i + 1);
    batch.clear();
    batch.add(continued.tokens.back(), 3, plen + i, true);
  }
  expect_same(reference, continued);
  decode.release(3);
  decode.check_no_leaks();
}

// Counts the reads of blocks the sliding window freed (attention must make none), serving
// a live block instead so that a wrong read shows in the logits too.
class FreedBlockGuard final : public KvStore {
 public:
  explicit FreedBlockGuard(PagedKvStore& kv) : kv_(kv) {}
  const KvLayout& layout() const override { return kv_.layout(); }
  std::span<const int32_t> block_table(int32_t seq_id) const override {
    return kv_.block_table(seq_id);
  }
  uint8_t* block_data(int32_t block) override {
    if (block != kFreedBlock) return kv_.block_data(block);
    freed_reads_.fetch_add(1);
    return kv_.block_data(kv_.block_table(0).back());
  }
  int freed_reads() const { return freed_reads_.load(); }

 private:
  PagedKvStore& kv_;
  std::atomic<int> freed_reads_{0};
};

// stories260K made to attend through a 24-position window on every layer: freeing the
// blocks before the window (PagedKvStore::free_outside_window, in a pool of only the
// windowed bound) must change no logit, for f16 and quantized KV and for block sizes below,
// at and above attention's value chunk.
TEST_F(PagedModelTest, FreeingBlocksOutsideTheSlidingWindowChangesNoLogit) {
  constexpr int kWindow = 24;
  constexpr int kSteps = 150;
  auto windowed_file = std::make_shared<ModelFile>(*file_);
  windowed_file->config.sliding_window = kWindow;
  windowed_file->config.window_layers = WindowLayers::kAll;
  Model windowed(windowed_file);
  const std::vector<int32_t>& prompt = kPrompts[2];
  const int plen = static_cast<int>(prompt.size());
  // q4_0 needs head dimensions of 16 (stories260K has 8); it reads values in q8_0's chunks.
  for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
    for (int block_size : {8, 16, 48}) {
      SCOPED_TRACE(fmt::format("{} blocks of {}", kv_type_name(type), block_size));
      const KvLayout kv_layout = KvLayout::for_model(windowed.config(), block_size, type);
      auto run = [&](KvStore& kv, const std::function<void(int32_t, int)>& prepare) {
        return generate(windowed, kv, {prompt}, kSteps, prepare)[0];
      };
      PagedKvStore all(kv_layout, 64, max_context());
      const Generation reference = run(all, [&](int32_t s, int n) { all.reserve(s, n); });
      all.release(0);
      // The window is in force: the same store without it computes other logits.
      const Generation unwindowed =
          generate(all, {prompt}, kSteps, [&](int32_t s, int n) { all.reserve(s, n); })[0];
      all.release(0);
      EXPECT_NE(reference.logits.back(), unwindowed.logits.back());

      PagedKvStore probe(kv_layout, 1, max_context());
      probe.set_sliding_window(kWindow, plen);
      PagedKvStore kv(kv_layout, probe.blocks_for_new_sequence(max_context()), max_context());
      kv.set_sliding_window(kWindow, plen);
      ASSERT_LT(kv.total_blocks(), (plen + kSteps + block_size - 1) / block_size)
          << "the pool must be too small for the whole sequence";
      FreedBlockGuard guard(kv);
      int freed = 0;
      const Generation windowed_run = run(guard, [&](int32_t s, int n) {
        freed += kv.free_outside_window(s, n - 1);  // the next query is at n - 1
        kv.reserve(s, n);
      });
      EXPECT_EQ(guard.freed_reads(), 0);
      EXPECT_GT(freed, 0);
      expect_same(reference, windowed_run);
      kv.release(0);
      kv.check_no_leaks();
    }
  }
}

}  // namespace
}  // namespace rapide
