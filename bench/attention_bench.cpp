// Attention kernel throughput on the synth100m shape (12 query heads, 4 KV heads, head dim
// 64, cache in 16-token blocks), one layer, per KV type (second argument: 0 f16, 2 q8_0,
// 3 q4_0):
//   Prefill/<context>: a prefix-cache hit, 60 new tokens of one sequence attending to
//                      `context` cached positions plus themselves (issue 5's hit).
//   Decode/<seqs>:     `seqs` sequences decoding one token each at position 300 (the batch
//                      workload's decode step).
//   DecodeContext/<n>: 8 sequences decoding one token each with `n` positions to attend; the
//                      times over n split a job's cost into a fixed part and one per position.
//   DecodeStep/<seqs>: `seqs` sequences at 160 positions, the middle of bench_speed_report's
//                      32-row step (contexts 128-192); 384 sequences are that step's 12 layers
//                      of K/V (33 MB with a q8_0 cache), read from DRAM as the step reads them.
// GFLOP/s counts 4 flops per (query head, position, dimension): the QK dot and the PV sum.
// Run:  build/bench/attention_bench   (RAPIDE_BENCH_THREADS=1 isolates the kernel from
// scheduling noise; RAPIDE_ISA=avx2 to compare kernels)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "bench_pool.h"
#include "kernels/kv_rows.h"
#include "model/attention.h"
#include "model/contiguous_kv_store.h"

namespace rapide {
namespace {

constexpr int kHeads = 12, kKvHeads = 4, kHeadDim = 64, kBlock = 16;

ModelConfig shape() {
  ModelConfig c;
  c.n_layers = 1;
  c.n_heads = kHeads;
  c.n_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.dim = kHeads * kHeadDim;
  return c;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Fills `sequences` caches with `filled` positions each, then times attention of `batch`.
void run(benchmark::State& state, int sequences, int filled, const Batch& batch) {
  const auto type = static_cast<KvType>(state.range(1));
  state.SetLabel(kv_type_name(type));
  ContiguousKvStore kv(shape(), sequences, filled + 64, type, kBlock);
  const size_t kv_row = static_cast<size_t>(kKvHeads) * kHeadDim;
  for (int s = 0; s < sequences; ++s) {
    Batch fill;
    for (int p = 0; p < filled; ++p) fill.add(1, s, p, false);
    const auto k = random_values(kv_row * filled, 2 * s + 1);
    const auto v = random_values(kv_row * filled, 2 * s + 2);
    Attention::write_kv(kv, 0, fill, k.data(), v.data());
  }
  const size_t n = batch.tokens.size();
  const auto k = random_values(kv_row * n, 7);
  const auto v = random_values(kv_row * n, 8);
  Attention::write_kv(kv, 0, batch, k.data(), v.data());
  const auto q = random_values(n * kHeads * kHeadDim, 9);
  std::vector<float> out(q.size());
  Attention attention;
  double flops = 0;
  for (size_t i = 0; i < n; ++i) flops += 4.0 * kHeads * kHeadDim * (batch.positions[i] + 1);
  for (auto _ : state) {
    attention.attend(kv, 0, batch, q.data(), kHeads, out.data(), bench_pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = bench_pool().size();
}

void BM_Prefill(benchmark::State& state) {
  const int context = static_cast<int>(state.range(0));
  Batch batch;
  for (int i = 0; i < 60; ++i) batch.add(1, 0, context + i, i == 59);
  run(state, 1, context, batch);
}
BENCHMARK(BM_Prefill)->ArgsProduct({{300, 2700}, {0, 2, 3}})->UseRealTime();

void BM_Decode(benchmark::State& state) {
  const int sequences = static_cast<int>(state.range(0));
  Batch batch;
  for (int s = 0; s < sequences; ++s) batch.add(1, s, 300, true);
  run(state, sequences, 300, batch);
}
BENCHMARK(BM_Decode)->ArgsProduct({{1, 64}, {0, 2, 3}})->UseRealTime();

void BM_DecodeContext(benchmark::State& state) {
  const int positions = static_cast<int>(state.range(0));
  Batch batch;
  for (int s = 0; s < 8; ++s) batch.add(1, s, positions - 1, true);
  run(state, 8, positions - 1, batch);
}
BENCHMARK(BM_DecodeContext)->ArgsProduct({{16, 64, 160, 320}, {0, 2}})->UseRealTime();

void BM_DecodeStep(benchmark::State& state) {
  const int sequences = static_cast<int>(state.range(0));
  Batch batch;
  for (int s = 0; s < sequences; ++s) batch.add(1, s, 159, true);
  run(state, sequences, 159, batch);
}
BENCHMARK(BM_DecodeStep)->ArgsProduct({{32, 384}, {0, 2}})->UseRealTime();

}  // namespace
}  // namespace rapide

BENCHMARK_MAIN();
