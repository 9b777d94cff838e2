// What the KV offload tier costs the engine thread (issue 49: offload off the step's critical
// path). One iteration is a burst of 32 evicted blocks stored as one step's evictions do
// (16 positions of synth100m: 12 layers x 12 KV heads x 64 dims, f16 K and V = 576 KiB a
// block, 18 MiB a burst); the timed part is the owner's store() calls only, the worker's
// remaining work is waited for outside the timing.
//
//   Store/<codec>/<files>/<background>: codec 0 none, 1 lz4, 2 zstd; files 1 = no RAM
//   level, every block a file write in a temporary directory (the worst case: zstd plus a
//   write per block), 0 = compressed RAM only; background 0 = inline (the step waited for
//   compression and writes), 1 = the worker thread (the step pays a copy of the raw bytes).
//   Time: ms per burst on the owner thread (real time); counter worker_ms_per_burst: the
//   worker's compression and writes.
//
// Run:  build/bench/offload_tier_bench
// The KV bytes are half random, half repetitive (real K/V compresses ~1.1-1.3x with zstd).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kv/offload_tier.h"

namespace rapide {
namespace {

constexpr int kBurst = 32;

KvLayout synth100m_block() {
  return KvLayout{12, 12, 64, 16, KvType::kF16};
}

std::vector<std::vector<uint8_t>> blocks(size_t bytes) {
  std::vector<std::vector<uint8_t>> out(kBurst, std::vector<uint8_t>(bytes));
  std::mt19937 rng(42);
  for (auto& b : out) {
    for (size_t k = 0; k < bytes; ++k) {
      b[k] = k % 2 == 0 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(k % 13);
    }
  }
  return out;
}

void Store(benchmark::State& state) {
  const auto codec = static_cast<OffloadCodec>(state.range(0));
  const bool files = state.range(1) != 0;
  const KvLayout layout = synth100m_block();
  const auto data = blocks(layout.block_bytes());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "rapide_offload_tier_bench";
  std::filesystem::remove_all(dir);
  OffloadTierOptions o;
  o.codec = codec;
  o.background = state.range(2) != 0;
  o.max_pending_bytes = 2ull * kBurst * layout.block_bytes();  // a burst never waits
  if (files) {
    o.dir = dir.string();
    o.disk_bytes = 1ull << 30;
  } else {
    o.ram_bytes = 1ull << 30;
  }
  uint64_t next_hash = 1;
  double worker_ms = 0;
  {
    OffloadTier tier(o, layout, 0xbe4c);
    for (auto _ : state) {
      for (int i = 0; i < kBurst; ++i) {
        OffloadedBlockMeta meta{next_hash++, 0, std::vector<int32_t>(16, i)};
        tier.store(meta, data[i]);
      }
      state.PauseTiming();
      tier.flush();
      state.ResumeTiming();
    }
    worker_ms = tier.stats().worker_ns / 1e6;
  }
  std::filesystem::remove_all(dir);
  state.counters["worker_ms_per_burst"] = worker_ms / static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBurst *
                          static_cast<int64_t>(layout.block_bytes()));
}
BENCHMARK(Store)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})
    ->ArgNames({"codec", "files", "background"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace rapide

BENCHMARK_MAIN();
