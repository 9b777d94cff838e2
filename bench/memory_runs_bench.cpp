// Read bandwidth of one thread when the bytes come in runs scattered over a large buffer:
// the access pattern of attention in a batched decode step. There each job reads, per KV
// block, one (layer, K or V, head) part: block_size * head_dim * 2 bytes (2 KiB for 16
// positions of head dim 64 in f16), 192 KiB apart for synth100m (every layer's parts of a
// block lie together). A run here is summed with the bandwidth probe's SIMD loop; the next
// run's first 4 KiB are prefetched as the current one starts, as the attention kernel
// requests the next blocks' parts (kernels/attention_simd.h, KvPrefetch).
//
//   Runs/<bytes>:  runs of that many bytes at shuffled places in 1 GiB on huge pages;
//                  Runs/1073741824 is one sequential stream, the probe's own pattern.
//   Latency/<MiB>: ns per load of a chain of dependent loads at random lines within that
//                  many MiB on huge pages: the cache levels' sizes and a DRAM miss's cost,
//                  which with a core's ~two dozen misses in flight bound the short runs.
//
// Run:  build/bench/memory_runs_bench
// In isolation the per-thread rate grows with the run length, because the hardware
// prefetcher only gets ahead inside a long run while for short runs only the lines in flight
// from software prefetches (a core's L1 miss buffers) overlap the DRAM latency. That did not
// carry over to attention: a per-(layer, head) contiguous KV layout (26-52 KiB runs) measured
// 1-3 % slower than 2 KiB parts in the 32-sequence decode step (docs/engine.md, fifth round).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/huge_pages.h"
#include "kernels/bandwidth.h"

namespace rapide {
namespace {

constexpr size_t kBuffer = size_t{1} << 30;

const uint8_t* buffer() {
  static LargeBuffer memory;
  if (memory.size() == 0) {
    memory.resize(kBuffer);
    std::fill(memory.data(), memory.data() + kBuffer, uint8_t{1});
  }
  return memory.data();
}

using SumLines = uint64_t (*)(const uint8_t*, size_t);

SumLines sum_lines() {
  if (active_isa_level() >= IsaLevel::kAvx512) return bandwidth::sum_lines_avx512;
  if (active_isa_level() >= IsaLevel::kAvx2) return bandwidth::sum_lines_avx2;
  return bandwidth::sum_lines_scalar;
}

void BM_Runs(benchmark::State& state) {
  const size_t run = static_cast<size_t>(state.range(0));
  const uint8_t* data = buffer();
  const SumLines sum = sum_lines();
  // Every run of the buffer once per pass, in a shuffled order: no two consecutive runs are
  // neighbours, so each starts cold as a KV part does.
  std::vector<uint32_t> order(kBuffer / run);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  uint64_t sink = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < order.size(); ++i) {
      if (i + 1 < order.size()) {
        const uint8_t* next = data + order[i + 1] * run;
        for (size_t off = 0; off < std::min<size_t>(run, 4096); off += 64) {
          __builtin_prefetch(next + off, 0, 3);
        }
      }
      sink += sum(data + order[i] * run, run / 64);
    }
    bytes += kBuffer;
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Runs)
    ->Arg(2048)
    ->Arg(4096)
    ->Arg(8192)
    ->Arg(20480)
    ->Arg(65536)
    ->Arg(262144)
    ->Arg(kBuffer)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Latency(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  const size_t lines = bytes / 64;
  static LargeBuffer memory;
  if (memory.size() < bytes) memory.resize(bytes);
  // One cycle through every line in a shuffled order; each line holds the next one's index.
  std::vector<uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(11));
  auto slot = [&](size_t line) { return reinterpret_cast<uint64_t*>(memory.data() + line * 64); };
  for (size_t i = 0; i < lines; ++i) *slot(order[i]) = order[(i + 1) % lines];
  uint64_t at = order[0];
  for (size_t i = 0; i < lines; ++i) at = *slot(at);  // warm the caches and the TLB
  constexpr size_t kLoads = size_t{1} << 20;
  for (auto _ : state) {
    for (size_t i = 0; i < kLoads; ++i) at = *slot(at);
  }
  benchmark::DoNotOptimize(at);
  // A rate of loads per nanosecond, inverted: nanoseconds per load.
  state.counters["ns/load"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kLoads) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Latency)
    ->Arg(1)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace rapide

BENCHMARK_MAIN();
