// Matmul throughput on the synth100m shape (dim 768, 12 layers, 4 of 12 heads for K/V,
// FFN 2048, vocab 32000): every weight matrix of one forward step, multiplied by n tokens.
//   n = 1:      decode, memory-bound: GB/s of weights and % of the read-bandwidth roofline
//               measured by the probe in the same process.
//   n = 32/128: batched decode / prefill, compute-bound: GFLOP/s (2 per weight per token).
// BM_StreamBySize: decode speed by matrix size (the fixed cost of each matrix).
// BM_FmaPeak: the f32 FMA peak of the same threads, what n = 32/128 F16 is bounded by.
// Run:  build-kern/bench/matmul_bench [--benchmark_filter=Q8_0]   (RAPIDE_ISA=avx2 to compare)
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "bench_pool.h"
#include "kernels/bandwidth.h"
#include "kernels/matmul.h"

namespace rapide {
namespace {

constexpr int64_t kDim = 768, kKvDim = 256, kFfn = 2048, kVocab = 32000, kLayers = 12;

double probe_bandwidth() {
  static const double bw = measure_read_bandwidth(bench_pool());
  return bw;
}

struct Model {
  TensorType type;
  std::vector<WeightMatrix> matrices;
  double bytes = 0;
  double params = 0;
};

// Random weights of `type` in GGUF row layout, and a view of them for prepare().
struct RandomWeights {
  std::vector<uint8_t> data;
  TensorView view;
};
RandomWeights random_weights(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  const int64_t row_bytes = tensor_row_bytes(type, cols);
  RandomWeights w;
  w.data.resize(static_cast<size_t>(rows * row_bytes));
  std::vector<float> row(static_cast<size_t>(cols));
  uint32_t state = seed * 2654435761u + 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(static_cast<int32_t>(state)) * (0.02f / 2147483648.0f);
    }
    quantize_row(type, row.data(), w.data.data() + r * row_bytes, cols);
  }
  w.view.name = std::string("bench");
  w.view.type = type;
  w.view.shape = {cols, rows};
  w.view.data = w.data.data();
  w.view.size_bytes = w.data.size();
  return w;
}

WeightMatrix random_matrix(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  const RandomWeights w = random_weights(type, rows, cols, seed);
  return WeightMatrix::prepare(w.view);  // packs a copy: `w` may go
}

// One model at a time (the F16 one is 200+ MB).
const Model& model(TensorType type) {
  static std::unique_ptr<Model> cached;
  if (cached && cached->type == type) return *cached;
  cached.reset();
  auto m = std::make_unique<Model>();
  m->type = type;
  struct Shape {
    int64_t rows, cols;
  };
  const Shape layer[] = {{kDim, kDim}, {kKvDim, kDim}, {kKvDim, kDim}, {kDim, kDim},
                         {kFfn, kDim}, {kFfn, kDim},   {kDim, kFfn}};
  uint32_t seed = 1;
  for (int l = 0; l < kLayers; ++l) {
    for (Shape s : layer) m->matrices.push_back(random_matrix(type, s.rows, s.cols, seed++));
  }
  m->matrices.push_back(random_matrix(type, kVocab, kDim, seed++));
  for (const WeightMatrix& w : m->matrices) {
    m->bytes += static_cast<double>(tensor_row_bytes(type, w.cols()) * w.rows());
    m->params += static_cast<double>(w.rows() * w.cols());
  }
  cached = std::move(m);
  return *cached;
}

void BM_ReadBandwidth(benchmark::State& state) {
  double bw = 0;
  for (auto _ : state) bw = probe_bandwidth();
  state.counters["GB/s"] = bw / 1e9;
  state.counters["threads"] = bench_pool().size();
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);

// state.range(0): tensor type, state.range(1): tokens.
void BM_ModelMatmuls(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const int64_t n = state.range(1);
  const Model& m = model(type);
  const double roofline = probe_bandwidth();
  std::vector<float> x(static_cast<size_t>(n * kFfn));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) * 0.01f - 0.5f;
  std::vector<float> y(static_cast<size_t>(n * kVocab));
  for (const WeightMatrix& w : m.matrices) w.multiply(x.data(), n, y.data(), bench_pool());  // warm
  int64_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const WeightMatrix& w : m.matrices) w.multiply(x.data(), n, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
    ++steps;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double per_step = seconds / static_cast<double>(steps);
  state.SetLabel(std::string(tensor_type_name(type)) + " " + isa_level_name(active_isa_level()));
  state.counters["tok/s"] = static_cast<double>(n) / per_step;
  state.counters["GB/s"] = m.bytes / per_step / 1e9;
  state.counters["GFLOP/s"] = 2.0 * m.params * static_cast<double>(n) / per_step / 1e9;
  state.counters["threads"] = bench_pool().size();
  state.counters["roofline%"] = 100.0 * m.bytes / per_step / roofline;
}

// One 768 x 768 matrix that stays in L2: the kernel's own speed per weight byte at n = 1,
// which must be well above the DRAM bandwidth for decode to reach the roofline.
void BM_CachedMatvec(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const WeightMatrix w = random_matrix(type, kDim, kDim, 99);
  std::vector<float> x(kDim, 0.25f), y(kDim);
  for (auto _ : state) {
    w.multiply(x.data(), 1, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(tensor_type_name(type)));
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(tensor_row_bytes(type, kDim) * kDim) * state.iterations() / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CachedMatvec)
    ->Arg(static_cast<int64_t>(TensorType::kF16))
    ->Arg(static_cast<int64_t>(TensorType::kQ8_0))
    ->Arg(static_cast<int64_t>(TensorType::kQ4_0))
    ->Arg(static_cast<int64_t>(TensorType::kBF16))
    ->Arg(static_cast<int64_t>(TensorType::kQ4_K))
    ->Arg(static_cast<int64_t>(TensorType::kQ5_K))
    ->Arg(static_cast<int64_t>(TensorType::kQ6_K))
    ->UseRealTime();

// Decode's cost per matrix: 256 MiB of weights (more than any cache) in matrices of
// state.range(1) KiB, multiplied one after another at n = 1 as a forward pass does, with
// the read probe. A model step is dozens of 0.1-1 MiB matrices; if small ones stream far
// below large ones, the fixed cost of each matrix (stream start, the threads' hand-off),
// not the kernel, keeps decode under the roofline. RAPIDE_BENCH_THREADS=1 for one thread.
void BM_StreamBySize(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const int64_t row_bytes = tensor_row_bytes(type, kDim);
  const int64_t rows = std::max<int64_t>(16, state.range(1) * 1024 / row_bytes / 16 * 16);
  const int64_t count = (int64_t{256} << 20) / (rows * row_bytes);
  // One matrix's bytes, packed count times (quantizing 256 MiB would take minutes).
  const int64_t cols = kDim;
  const RandomWeights w = random_weights(type, rows, cols, 12345);
  std::vector<WeightMatrix> ms;
  for (int64_t i = 0; i < count; ++i) ms.push_back(WeightMatrix::prepare(w.view));
  std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) * 0.01f - 0.5f;
  for (const WeightMatrix& m : ms) m.multiply(x.data(), 1, y.data(), bench_pool());  // warm
  int64_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (const WeightMatrix& m : ms) m.multiply(x.data(), 1, y.data(), bench_pool());
    benchmark::DoNotOptimize(y.data());
    ++steps;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(count * rows * row_bytes) * static_cast<double>(steps);
  const double probe = measure_read_bandwidth(bench_pool(), size_t{256} << 20);  // same minute
  state.SetLabel(std::string(tensor_type_name(type)));
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["probe_GB/s"] = probe / 1e9;
  state.counters["us/matrix"] = seconds / static_cast<double>(steps * count) * 1e6;
  state.counters["threads"] = bench_pool().size();
}
BENCHMARK(BM_StreamBySize)
    ->ArgsProduct({{static_cast<int64_t>(TensorType::kQ8_0),
                    static_cast<int64_t>(TensorType::kQ4_K)},
                   {128, 512, 2048, 65536}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The f32 FMA peak, for the GFLOP/s above to be read against: 12 independent chains of
// register-only FMAs (more than latency x ports, so none waits) on every pool thread at once,
// zmm where AVX-512 runs, ymm otherwise. The F16/F32 kernels do one such FMA per weight and
// token (bit-exact to the scalar reference), so this bounds them; BF16 and the integer
// kernels do more per instruction.
// The chains stay in registers and are consumed by DoNotOptimize after the loop, so the loop
// is nothing but FMAs.
[[gnu::target("avx512f")]] void fma_peak_avx512(int64_t iterations) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t k = 0; k < iterations; ++k) {
    for (__m512& v : a) v = _mm512_fmadd_ps(v, m, c);
  }
  for (__m512& v : a) benchmark::DoNotOptimize(v);
}
[[gnu::target("avx2,fma")]] void fma_peak_avx2(int64_t iterations) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t k = 0; k < iterations; ++k) {
    for (__m256& v : a) v = _mm256_fmadd_ps(v, m, c);
  }
  for (__m256& v : a) benchmark::DoNotOptimize(v);
}

void BM_FmaPeak(benchmark::State& state) {
  const bool zmm = cpu_features().best_level() >= IsaLevel::kAvx512;
  if (!zmm && cpu_features().best_level() < IsaLevel::kAvx2) {
    state.SkipWithError("no FMA");
    return;
  }
  constexpr int64_t kIterations = 20'000'000;
  ThreadPool& pool = bench_pool();
  double flops = 0;
  for (auto _ : state) {
    pool.run([&](int) { zmm ? fma_peak_avx512(kIterations) : fma_peak_avx2(kIterations); });
    flops += (zmm ? 32.0 : 16.0) * 12 * static_cast<double>(kIterations) * pool.size();
  }
  state.SetLabel(zmm ? "zmm" : "ymm");
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["per_thread"] =
      benchmark::Counter(flops / 1e9 / pool.size(), benchmark::Counter::kIsRate);
  state.counters["threads"] = pool.size();
}
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond)->UseRealTime();

void model_args(benchmark::internal::Benchmark* b) {
  for (TensorType t : {TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kBF16,
                       TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    for (int64_t n : {1, 32, 128}) b->Args({static_cast<int64_t>(t), n});
  }
}
BENCHMARK(BM_ModelMatmuls)->Apply(model_args)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace rapide

BENCHMARK_MAIN();
