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
//   KvReread/<MiB>: a q8_0 layer's K/V share of one thread (1,300 parts of 1,088 bytes,
//                  1.4 MB) read, then <MiB> of weights streamed past it, then read again:
//                  us for the re-read and for a cold set after the same stream. Whether the
//                  last-level cache could hold the next layer's K/V across a layer's products.
//   KvPrefetchDuringProducts/<hint>/<MiB>: <MiB> of weights streamed through a compute loop of 32
//                  vpdpbusd per 64-byte line (a 32-row Q8_0 product's work per weight byte),
//                  then that K/V set read as attention reads it (next parts prefetched two
//                  runs ahead), alternated with the same products issuing software prefetches
//                  (hint 0: T0, 1: T1, 2: T2) of every line of the set spread over the loop:
//                  us of products and of attention for each way. AVX-512 machines only.
//
// Run:  build/bench/memory_runs_bench
// In isolation the per-thread rate grows with the run length, because the hardware
// prefetcher only gets ahead inside a long run while for short runs only the lines in flight
// from software prefetches (a core's L1 miss buffers) overlap the DRAM latency. That did not
// carry over to attention: a per-(layer, head) contiguous KV layout (26-52 KiB runs) measured
// 1-3 % slower than 2 KiB parts in the 32-sequence decode step (docs/engine.md, fifth round).
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <algorithm>
#include <chrono>
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

// A q8_0 K/V set as one thread of a 32-row step reads it for one layer: half of 32 sequences
// x 4 heads x 10 blocks of K and of V, parts of 1,088 bytes (16 positions x 64 codes + scales),
// at shuffled places of the buffer's first half. Weights stream through its second half.
constexpr size_t kKvPart = 1088, kKvParts = 1300;
constexpr size_t kWeightsAt = kBuffer / 2;

std::vector<size_t> kv_set(std::mt19937& rng) {
  std::vector<size_t> parts(kKvParts);
  std::uniform_int_distribution<size_t> place(0, kWeightsAt / kKvPart - 1);
  for (size_t& p : parts) p = place(rng) * kKvPart / 64 * 64;
  return parts;
}

// Reads every part (the next parts' lines prefetched two parts ahead, as attention does);
// microseconds.
double read_kv(const uint8_t* data, const std::vector<size_t>& parts, const SumLines sum,
               uint64_t& sink) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 2 < parts.size()) {
      for (size_t off = 0; off < kKvPart; off += 64) __builtin_prefetch(data + parts[i + 2] + off);
    }
    sink += sum(data + parts[i], kKvPart / 64);
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

// Streams `bytes` of weights from `cursor` (advanced, wrapping in the buffer's second half).
void stream_weights(const uint8_t* data, size_t& cursor, size_t bytes, const SumLines sum,
                    uint64_t& sink) {
  for (size_t done = 0; done < bytes; done += 1 << 16) {
    sink += sum(data + kWeightsAt + cursor, (1 << 16) / 64);
    cursor = (cursor + (1 << 16)) % (kBuffer - kWeightsAt);
  }
}

void BM_KvReread(benchmark::State& state) {
  const size_t streamed = static_cast<size_t>(state.range(0)) << 20;
  const uint8_t* data = buffer();
  const SumLines sum = sum_lines();
  std::mt19937 rng(13);
  uint64_t sink = 0;
  size_t cursor = 0;
  double reread = 0, cold = 0;
  for (auto _ : state) {
    const auto parts = kv_set(rng);
    read_kv(data, parts, sum, sink);
    stream_weights(data, cursor, streamed, sum, sink);
    reread += read_kv(data, parts, sum, sink);
    const auto fresh = kv_set(rng);
    stream_weights(data, cursor, streamed, sum, sink);
    cold += read_kv(data, fresh, sum, sink);
  }
  benchmark::DoNotOptimize(sink);
  const double n = static_cast<double>(state.iterations());
  state.counters["reread_us"] = reread / n;
  state.counters["cold_us"] = cold / n;
}
BENCHMARK(BM_KvReread)->Arg(0)->Arg(2)->Arg(6)->Arg(12)->Arg(24)->Unit(benchmark::kMillisecond);

// The products: 32 vpdpbusd per weight line into 8 chains, each line prefetching `lines[k]`
// every `every` lines when `lines` is given. Microseconds.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double products(
    const uint8_t* data, size_t& cursor, size_t bytes, const std::vector<size_t>* lines, int hint,
    uint64_t& sink) {
  const auto start = std::chrono::steady_clock::now();
  __m512i acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_set1_epi32(j);
  const size_t n = bytes / 64;
  const size_t every = lines ? std::max<size_t>(1, n / lines->size()) : 0;
  size_t k = 0, until = every;  // a countdown, not i % every: a division per line costs
  for (size_t i = 0; i < n; ++i) {
    const __m512i w = _mm512_load_si512(data + kWeightsAt + cursor);
    cursor = (cursor + 64) % (kBuffer - kWeightsAt);
    for (int r = 0; r < 32; r += 8) {
      for (int j = 0; j < 8; ++j) {
        acc[j] = _mm512_dpbusd_epi32(acc[j], w, _mm512_set1_epi32(0x01010101 * (r + j + 1)));
      }
    }
    if (lines && --until == 0 && k < lines->size()) {
      until = every;
      const char* line = reinterpret_cast<const char*>(data + (*lines)[k++]);
      if (hint == 0) _mm_prefetch(line, _MM_HINT_T0);
      if (hint == 1) _mm_prefetch(line, _MM_HINT_T1);
      if (hint == 2) _mm_prefetch(line, _MM_HINT_T2);
    }
  }
  alignas(64) uint32_t lanes[16];
  for (int j = 0; j < 8; ++j) {
    _mm512_store_si512(lanes, acc[j]);
    sink += lanes[0] + lanes[15];
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

void BM_KvPrefetchDuringProducts(benchmark::State& state) {
  if (active_isa_level() < IsaLevel::kAvx512) {
    state.SkipWithError("needs AVX-512 VNNI");
    return;
  }
  const int hint = static_cast<int>(state.range(0));
  const size_t weights = static_cast<size_t>(state.range(1)) << 20;
  const uint8_t* data = buffer();
  const SumLines sum = sum_lines();
  std::mt19937 rng(17);
  uint64_t sink = 0;
  size_t cursor = 0;
  double plain[2] = {}, prefetched[2] = {};  // products, attention
  int64_t it = 0;
  for (auto _ : state) {
    for (int v = 0; v < 2; ++v) {
      const bool with = (v + it) % 2 == 1;  // alternate which way runs first
      const auto parts = kv_set(rng);
      std::vector<size_t> lines;
      for (size_t p : parts) {
        for (size_t off = 0; off < kKvPart; off += 64) lines.push_back(p + off);
      }
      double* into = with ? prefetched : plain;
      into[0] += products(data, cursor, weights, with ? &lines : nullptr, hint, sink);
      into[1] += read_kv(data, parts, sum, sink);
    }
    ++it;
  }
  benchmark::DoNotOptimize(sink);
  const double n = static_cast<double>(state.iterations());
  state.counters["products_us"] = plain[0] / n;
  state.counters["attention_us"] = plain[1] / n;
  state.counters["products_pf_us"] = prefetched[0] / n;
  state.counters["attention_pf_us"] = prefetched[1] / n;
}
BENCHMARK(BM_KvPrefetchDuringProducts)
    ->ArgsProduct({{0, 1, 2}, {3, 12}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rapide

BENCHMARK_MAIN();
