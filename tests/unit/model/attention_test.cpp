// Attention kernels: the scalar reference against the definition (computed in double from
// the cached K/V), every SIMD kernel the CPU has against the reference on random data
// (f16 and f32 caches, head dims, block sizes that do and do not fill a vector tile, GQA
// groups, partial tiles), and batch invariance: a token's output is bit-identical whether it
// is computed alone or inside a job with other queries. Quantized caches (q8_0, q4_0): the
// kernels compute attention over the dequantized cache with the quantized query, within the
// bound that quantizing the probabilities (attention_value_weights.h) allows, and stay
// within the error bound that quantization allows of the f32 cache's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/attention_value_weights.h"
#include "kernels/kv_rows.h"
#include "model/attention.h"
#include "model/contiguous_kv_store.h"

namespace rapide {
namespace {

struct Shape {
  int n_heads;
  int n_kv_heads;
  int head_dim;
  int block_size;
  KvType type;
};

std::string describe(const Shape& s) {
  return std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + " heads, dim " +
         std::to_string(s.head_dim) + ", block " + std::to_string(s.block_size) + ", " +
         kv_type_name(s.type);
}

ModelConfig config_for(const Shape& s) {
  ModelConfig c;
  c.n_layers = 2;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.dim = s.n_heads * s.head_dim;
  return c;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Two sequences: sequence 0 gets `len0` tokens and sequence 1 `len1`, as one prefill batch.
struct Scenario {
  Shape shape;
  int len0;
  int len1;
  Batch batch;
  std::vector<float> q, k, v;

  Scenario(const Shape& s, int a, int b, uint32_t seed) : shape(s), len0(a), len1(b) {
    for (int i = 0; i < len0; ++i) batch.add(1, 0, i, true);
    for (int i = 0; i < len1; ++i) batch.add(1, 1, i, true);
    const size_t n = static_cast<size_t>(batch.size());
    q = random_values(n * s.n_heads * s.head_dim, seed);
    k = random_values(n * s.n_kv_heads * s.head_dim, seed + 1);
    v = random_values(n * s.n_kv_heads * s.head_dim, seed + 2);
  }
  size_t q_size() const { return q.size(); }
};

// Runs one layer's attention with `kernel` over a fresh cache; returns [n][n_heads*head_dim].
std::vector<float> run(const Scenario& sc, const AttentionKernel& kernel, ThreadPool& pool,
                       const AttentionScores& scores = {}, int max_context = 512) {
  const Shape& s = sc.shape;
  ContiguousKvStore kv(config_for(s), 2, max_context, s.type, s.block_size);
  Attention::write_kv(kv, 1, sc.batch, sc.k.data(), sc.v.data());
  Attention attention;
  attention.set_kernel(kernel);
  std::vector<float> out(sc.q_size(), -1.0f);
  attention.plan(kv, sc.batch, s.n_heads);
  attention.attend_planned(kv, 1, sc.batch, sc.q.data(), s.n_heads, out.data(), pool, scores);
  return out;
}

std::vector<AttentionKernel> simd_kernels(int head_dim) {
  std::vector<AttentionKernel> kernels;
  const IsaLevel best = cpu_features().best_level();
  if (best >= IsaLevel::kAvx2 && head_dim % 8 == 0) kernels.push_back({attend_job_avx2, 4, "avx2"});
  if (best >= IsaLevel::kAvx512 && head_dim % 16 == 0)
    kernels.push_back({attend_job_avx512, 12, "avx512"});
  return kernels;
}

// A SIMD kernel's output against the scalar kernel's. f16 probabilities may round to
// neighbouring f16 values when exp differs in the last bit; values are ~N(0,1), so an
// absolute 2e-3 covers one such step and nothing more. f32: the sums differ by FMA
// contraction only. Quantized caches: the scores are bit-identical (exact integers, the same
// float operations), but a probability that differs in its last bit can round to the
// neighbouring weight code (a tie at 1/2 within ~1e-5 of a code: rare); such a flip moves
// the 32 outputs of its group by one step times a code, at most the chunk's largest weight
// times 127 codes' worth of a ~N(0,1) value, < 0.05. So: at most 1% of the outputs beyond
// 2e-5, none beyond 0.05.
void expect_close_to_scalar(const std::vector<float>& got, const std::vector<float>& expected,
                            KvType type, const std::string& what) {
  const bool quantized = kv_type_quantized(type);
  const float tolerance = type == KvType::kF16 ? 2e-3f : quantized ? 0.05f : 2e-5f;
  size_t beyond = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], tolerance) << what << " at " << i;
    if (std::fabs(got[i] - expected[i]) > 2e-5f) ++beyond;
  }
  if (quantized) {
    EXPECT_LE(beyond, got.size() / 100) << what;
  }
}

// Plain attention, and gemma2's variations: a soft-cap on the scores and a sliding window
// (key j visible from query i when i - j < window), with a scale other than 1/sqrt(d).
class AttentionDefinition : public ::testing::TestWithParam<AttentionScores> {};

TEST_P(AttentionDefinition, ScalarMatchesDefinition) {
  const AttentionScores shape = GetParam();
  const Shape s{4, 2, 16, 5, KvType::kF32};
  Scenario sc(s, 23, 9, 7);
  ThreadPool pool(1);
  const std::vector<float> out = run(sc, scalar_attention_kernel(), pool, shape);
  const double scale = shape.scale != 0 ? shape.scale : 1 / std::sqrt(double(s.head_dim));
  const int q_row = s.n_heads * s.head_dim, kv_row = s.n_kv_heads * s.head_dim;
  for (int i = 0; i < sc.batch.size(); ++i) {
    const int first = sc.batch.seq_ids[i] == 0 ? 0 : sc.len0;  // the sequence's first token
    const int n = sc.batch.positions[i] + 1;
    for (int h = 0; h < s.n_heads; ++h) {
      const int kvh = h / (s.n_heads / s.n_kv_heads);
      std::vector<double> w(n, -INFINITY);
      double max_w = -1e300, total = 0;
      const int lo = shape.window > 0 ? std::max(0, n - shape.window) : 0;
      for (int t = lo; t < n; ++t) {
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) {
          dot += double(sc.q[i * q_row + h * s.head_dim + d]) *
                 sc.k[(first + t) * kv_row + kvh * s.head_dim + d];
        }
        w[t] = dot * scale;
        if (shape.softcap > 0) w[t] = shape.softcap * std::tanh(w[t] / shape.softcap);
        max_w = std::max(max_w, w[t]);
      }
      for (double& x : w) total += (x = std::exp(x - max_w));
      for (int d = 0; d < s.head_dim; ++d) {
        double expected = 0;
        for (int t = 0; t < n; ++t)
          expected += w[t] / total * sc.v[(first + t) * kv_row + kvh * s.head_dim + d];
        EXPECT_NEAR(out[i * q_row + h * s.head_dim + d], expected, 1e-5)
            << "token " << i << " head " << h;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionDefinition,
                         ::testing::Values(AttentionScores{}, AttentionScores{0.0f, 2.0f, 0},
                                           AttentionScores{0.0f, 0.0f, 6},
                                           AttentionScores{1.0f, 1.5f, 11}));

TEST(Attention, SimdKernelsMatchScalarWithSoftCapAndWindow) {
  const Shape shapes[] = {
      {4, 2, 16, 16, KvType::kF16}, {4, 2, 32, 7, KvType::kF32}, {8, 1, 64, 16, KvType::kF16}};
  const AttentionScores variants[] = {{0.0f, 2.0f, 0}, {0.0f, 0.0f, 20}, {1.0f, 3.0f, 33}};
  int checked = 0;
  for (const Shape& s : shapes) {
    for (const AttentionScores& v : variants) {
      Scenario sc(s, 37, 70, 13);
      ThreadPool pool(2);
      const std::vector<float> expected = run(sc, scalar_attention_kernel(), pool, v);
      for (const AttentionKernel& kernel : simd_kernels(s.head_dim)) {
        expect_close_to_scalar(
            run(sc, kernel, pool, v), expected, s.type,
            std::string(kernel.name) + " " + describe(s) + " window " + std::to_string(v.window));
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD attention kernel on this CPU";
}

TEST(Attention, SimdKernelsMatchScalar) {
  const Shape shapes[] = {
      {4, 2, 8, 16, KvType::kF16},    {4, 4, 16, 16, KvType::kF32},   {12, 4, 64, 16, KvType::kF16},
      {12, 4, 64, 7, KvType::kF16},   {12, 4, 64, 100, KvType::kF32}, {8, 1, 80, 256, KvType::kF16},
      {32, 8, 128, 16, KvType::kF16}, {6, 6, 64, 32, KvType::kF32},   {16, 2, 32, 24, KvType::kF16},
      {12, 4, 64, 16, KvType::kQ8_0}, {12, 4, 64, 7, KvType::kQ4_0},  {4, 2, 16, 16, KvType::kQ8_0},
      {8, 1, 128, 16, KvType::kQ4_0}, {4, 2, 8, 24, KvType::kQ8_0},   {6, 3, 96, 32, KvType::kQ8_0},
  };
  int checked = 0;
  for (const Shape& s : shapes) {
    const auto kernels = simd_kernels(s.head_dim);
    if (kernels.empty()) continue;
    Scenario sc(s, 37, 130, 11);
    ThreadPool pool(2);
    const std::vector<float> expected = run(sc, scalar_attention_kernel(), pool);
    for (const AttentionKernel& kernel : kernels) {
      expect_close_to_scalar(run(sc, kernel, pool), expected, s.type,
                             std::string(kernel.name) + " " + describe(s));
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD attention kernel on this CPU";
}

// Multi-head latent attention (model/mla_attention.h): every head over one latent KV head,
// as wide as DeepSeek-V3's (kv_lora_rank 512 + rope 64 = kMaxHeadDim) and as the reference
// file's (32 + 16, quantized in 16-dim groups).
TEST(Attention, SimdKernelsMatchScalarOnLatentRows) {
  const Shape shapes[] = {{16, 1, 576, 16, KvType::kF16},
                          {16, 1, 576, 16, KvType::kF32},
                          {16, 1, 576, 16, KvType::kQ8_0},
                          {2, 1, 48, 16, KvType::kF16},
                          {2, 1, 48, 16, KvType::kQ8_0}};
  int checked = 0;
  for (const Shape& s : shapes) {
    Scenario sc(s, 37, 70, 11);
    ThreadPool pool(2);
    const std::vector<float> expected = run(sc, scalar_attention_kernel(), pool);
    for (const AttentionKernel& kernel : simd_kernels(s.head_dim)) {
      expect_close_to_scalar(run(sc, kernel, pool), expected, s.type,
                             std::string(kernel.name) + " " + describe(s));
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD attention kernel on this CPU";
}

// A context of more blocks than a SIMD job resolves up front (JobBlocks::kResolved in
// kernels/attention_simd.h: 128) reads its blocks through the store instead; the same output.
TEST(Attention, SimdKernelsMatchScalarPastTheResolvedBlocks) {
  int checked = 0;
  for (const Shape s : {Shape{4, 2, 16, 4, KvType::kF16}, Shape{4, 2, 16, 4, KvType::kQ8_0}}) {
    const auto kernels = simd_kernels(s.head_dim);
    Scenario sc(s, 600, 9, 13);  // 150 blocks of 4
    ThreadPool pool(2);
    const std::vector<float> expected = run(sc, scalar_attention_kernel(), pool, {}, 640);
    for (const AttentionKernel& kernel : kernels) {
      expect_close_to_scalar(run(sc, kernel, pool, {}, 640), expected, s.type,
                             std::string(kernel.name) + " " + describe(s));
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD attention kernel on this CPU";
}

TEST(Attention, OutputDoesNotDependOnTheJobItLandsIn) {
  for (const Shape s : {Shape{12, 4, 64, 16, KvType::kF16}, Shape{12, 4, 64, 16, KvType::kQ4_0}}) {
    for (const AttentionKernel& kernel : simd_kernels(s.head_dim)) {
      Scenario sc(s, 45, 3, 5);
      ThreadPool pool(2);
      const std::vector<float> together = run(sc, kernel, pool);
      // The last token of sequence 0 again, decoded alone over the same cache.
      ContiguousKvStore kv(config_for(s), 2, 512, s.type, s.block_size);
      Attention::write_kv(kv, 1, sc.batch, sc.k.data(), sc.v.data());
      Batch alone;
      alone.add(1, 0, sc.len0 - 1, true);
      const size_t q_row = static_cast<size_t>(s.n_heads) * s.head_dim;
      const float* q = sc.q.data() + (sc.len0 - 1) * q_row;
      std::vector<float> out(q_row);
      Attention attention;
      attention.set_kernel(kernel);
      attention.attend(kv, 1, alone, q, s.n_heads, out.data(), pool);
      for (size_t d = 0; d < q_row; ++d) {
        ASSERT_EQ(out[d], together[(sc.len0 - 1) * q_row + d]) << kernel.name << " element " << d;
      }
    }
  }
}

// A cache whose block tables are given: sequences can share leading blocks, as the prefix
// cache makes them.
class SharedBlocksKv : public KvStore {
 public:
  SharedBlocksKv(const KvLayout& layout, std::vector<std::vector<int32_t>> tables)
      : layout_(layout), tables_(std::move(tables)) {
    int32_t blocks = 0;
    for (const auto& t : tables_) {
      for (int32_t b : t) blocks = std::max(blocks, b + 1);
    }
    data_.assign(static_cast<size_t>(blocks) * layout_.block_bytes(), 0);
  }
  const KvLayout& layout() const override { return layout_; }
  std::span<const int32_t> block_table(int32_t seq_id) const override {
    return tables_[static_cast<size_t>(seq_id)];
  }
  uint8_t* block_data(int32_t block) override {
    return data_.data() + static_cast<size_t>(block) * layout_.block_bytes();
  }

 private:
  KvLayout layout_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<uint8_t> data_;
};

// Decode steps of sequences sharing prompt blocks run in shared-prefix jobs; each token's
// output must be bit-identical to its output computed alone, and match the reference.
TEST(Attention, SharedPrefixJobsGiveEachTokenItsOwnOutput) {
  for (const Shape s : {Shape{12, 4, 64, 16, KvType::kF16}, Shape{8, 2, 32, 16, KvType::kF32},
                        Shape{12, 4, 64, 24, KvType::kF16}, Shape{12, 4, 64, 16, KvType::kQ8_0},
                        Shape{8, 2, 32, 24, KvType::kQ4_0}}) {
    const int bs = s.block_size;
    // Sequences 0-3 share 10 blocks, 4-5 share the first 5 of them, 6 shares nothing.
    const int n_seqs = 7;
    std::vector<int> shared_blocks = {10, 10, 10, 10, 5, 5, 0};
    std::vector<int> lengths;
    std::vector<std::vector<int32_t>> tables(n_seqs);
    int32_t next_block = 10;
    for (int q = 0; q < n_seqs; ++q) {
      const int length = 10 * bs + 3 + 5 * q;
      lengths.push_back(length);
      for (int b = 0; b * bs < length; ++b) {
        tables[q].push_back(b < shared_blocks[q] ? b : next_block++);
      }
    }
    const KvLayout layout{2, s.n_kv_heads, s.head_dim, bs, s.type};
    SharedBlocksKv kv(layout, tables);
    // Every sequence writes its own positions (shared blocks get the same values: the
    // sequence that shares them writes the prefix's K/V, as the prefix cache would hold).
    const size_t kv_row = static_cast<size_t>(s.n_kv_heads) * s.head_dim;
    const std::vector<float> prefix_k = random_values(kv_row * 10 * bs, 21);
    const std::vector<float> prefix_v = random_values(kv_row * 10 * bs, 22);
    for (int q = 0; q < n_seqs; ++q) {
      Batch fill;
      for (int p = 0; p < lengths[q]; ++p) fill.add(1, q, p, false);
      std::vector<float> k = random_values(kv_row * lengths[q], 30 + q);
      std::vector<float> v = random_values(kv_row * lengths[q], 40 + q);
      const size_t prefix = kv_row * static_cast<size_t>(shared_blocks[q]) * bs;
      std::copy(prefix_k.begin(), prefix_k.begin() + static_cast<std::ptrdiff_t>(prefix),
                k.begin());
      std::copy(prefix_v.begin(), prefix_v.begin() + static_cast<std::ptrdiff_t>(prefix),
                v.begin());
      Attention::write_kv(kv, 1, fill, k.data(), v.data());
    }
    Batch step;
    for (int q = n_seqs - 1; q >= 0; --q) step.add(1, q, lengths[q] - 1, true);
    const size_t q_row = static_cast<size_t>(s.n_heads) * s.head_dim;
    const std::vector<float> queries = random_values(q_row * n_seqs, 50);
    ThreadPool pool(2);
    Attention scalar;
    scalar.set_kernel(scalar_attention_kernel());
    std::vector<float> expected(queries.size());
    scalar.attend(kv, 1, step, queries.data(), s.n_heads, expected.data(), pool);
    for (const AttentionKernel& kernel : simd_kernels(s.head_dim)) {
      Attention attention;
      attention.set_kernel(kernel);
      std::vector<float> together(queries.size());
      attention.attend(kv, 1, step, queries.data(), s.n_heads, together.data(), pool);
      if (kernel.max_queries >= 2 * (s.n_heads / s.n_kv_heads)) {
        EXPECT_GT(attention.shared_prefix_jobs(), 0) << kernel.name << " " << describe(s);
      }
      expect_close_to_scalar(together, expected, s.type,
                             std::string(kernel.name) + " " + describe(s));
      for (int i = 0; i < step.size(); ++i) {
        Batch alone;
        alone.add(1, step.seq_ids[i], step.positions[i], true);
        std::vector<float> out(q_row);
        attention.attend(kv, 1, alone, queries.data() + i * q_row, s.n_heads, out.data(), pool);
        EXPECT_EQ(attention.shared_prefix_jobs(), 0);
        for (size_t d = 0; d < q_row; ++d) {
          ASSERT_EQ(together[i * q_row + d], out[d])
              << kernel.name << " " << describe(s) << " sequence " << step.seq_ids[i] << " at "
              << d;
        }
      }
    }
  }
}

// Attention in double over what a quantized cache holds: the keys and values dequantized,
// the query as the kernels quantize it, exact probabilities; [n][n_heads*head_dim].
// weight_bound: how far quantizing the probabilities can move each output. A position's
// weight w = p * d (d its value scale in the output's group) is rounded to a step of m / 127
// (m the largest |w| of its chunk: kValueChunk positions of one block), an error of at most
// m / 254 times the position's code |v / d|; the bound is the sum of these over positions.
// Chunks follow attention_value_weights.h (value_chunk_start / value_chunk_end).
struct DequantizedAttention {
  std::vector<double> out, weight_bound;
};
DequantizedAttention dequantized_attention(const Scenario& sc, KvStore& kv) {
  const Shape& s = sc.shape;
  const KvLayout& layout = kv.layout();
  const int d = s.head_dim, q_row = s.n_heads * d, bs = layout.block_size;
  DequantizedAttention result{std::vector<double>(sc.q_size()), std::vector<double>(sc.q_size())};
  std::vector<float> key(d), value(d);
  for (int i = 0; i < sc.batch.size(); ++i) {
    const auto table = kv.block_table(sc.batch.seq_ids[i]);
    const int n = sc.batch.positions[i] + 1;
    for (int h = 0; h < s.n_heads; ++h) {
      const int kvh = h / (s.n_heads / s.n_kv_heads);
      QuantizedQuery qq;
      quantize_query(layout, sc.q.data() + i * q_row + h * d, qq);
      std::vector<double> w(n);
      double max_w = -1e300, total = 0;
      for (int t = 0; t < n; ++t) {
        const uint8_t* block = kv.block_data(table[t / bs]);
        load_kv_row(layout, block + layout.offset(1, false, kvh), false, t % bs, key.data());
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += double(qq.q[e]) * qq.d[e / layout.group_size()] * key[e];
        w[t] = dot / std::sqrt(double(d));
        max_w = std::max(max_w, w[t]);
      }
      for (double& x : w) total += (x = std::exp(x - max_w));
      double* out = result.out.data() + i * q_row + h * d;
      double* bound = result.weight_bound.data() + i * q_row + h * d;
      auto part = [&](int t) { return kv.block_data(table[t / bs]) + layout.offset(1, true, kvh); };
      auto scale = [&](int t, int g) {
        uint16_t half;
        std::memcpy(&half, part(t) + layout.value_scale_byte(t % bs, g), sizeof(half));
        return std::fabs(double(fp16_to_fp32(half)));
      };
      // Chunks of positions [chunk, chunk_end).
      for (int chunk = 0; chunk < n;) {
        const int chunk_end = std::min(n, value_chunk_end(chunk, bs));
        std::vector<double> max_weight(layout.n_groups());
        for (int t = chunk; t < chunk_end; ++t) {
          for (int g = 0; g < layout.n_groups(); ++g) {
            max_weight[g] = std::max(max_weight[g], w[t] / total * scale(t, g));
          }
        }
        for (int t = chunk; t < chunk_end; ++t) {
          load_kv_row(layout, part(t), true, t % bs, value.data());
          for (int e = 0; e < d; ++e) {
            const int g = e / layout.group_size();
            out[e] += w[t] / total * value[e];
            if (scale(t, g) > 0)
              bound[e] += max_weight[g] / 254 * std::fabs(value[e]) / scale(t, g);
          }
        }
        chunk = chunk_end;
      }
    }
  }
  return result;
}

// Every kernel on a quantized cache computes attention over the dequantized values with the
// quantized query, within the probabilities' quantization bound (plus 1e-5 absolute for the
// f32 sums of ~N(0,1) values; scores are sums of exact integer products times f16 scales).
// The bound is a worst case: the typical error must also stay well inside it (RMS error
// under a quarter of the RMS bound), which a misplaced code or scale would not.
TEST(Attention, QuantizedCacheIsAttentionOverItsDequantizedValues) {
  // Groups of 32, 16 (head_dim 16 and 80) and 8 (head_dim 8 and 24) dimensions; blocks of 7
  // (partial quads), 16 and 48 (a chunk of 32 and one of 16 per block).
  for (const Shape s : {Shape{12, 4, 64, 16, KvType::kQ8_0}, Shape{4, 2, 16, 7, KvType::kQ4_0},
                        Shape{8, 2, 128, 16, KvType::kQ4_0}, Shape{4, 2, 8, 16, KvType::kQ8_0},
                        Shape{4, 2, 80, 16, KvType::kQ8_0}, Shape{4, 2, 80, 16, KvType::kQ4_0},
                        Shape{4, 2, 24, 16, KvType::kQ8_0}, Shape{8, 2, 64, 48, KvType::kQ8_0},
                        Shape{8, 2, 64, 48, KvType::kQ4_0}, Shape{8, 1, 576, 16, KvType::kQ8_0},
                        Shape{2, 1, 48, 16, KvType::kQ8_0}}) {
    Scenario sc(s, 41, 75, 17);
    ContiguousKvStore kv(config_for(s), 2, 512, s.type, s.block_size);
    Attention::write_kv(kv, 1, sc.batch, sc.k.data(), sc.v.data());
    const DequantizedAttention expected = dequantized_attention(sc, kv);
    ThreadPool pool(2);
    std::vector<AttentionKernel> kernels = {scalar_attention_kernel()};
    for (const AttentionKernel& x : simd_kernels(s.head_dim)) kernels.push_back(x);
    for (const AttentionKernel& kernel : kernels) {
      const std::vector<float> got = run(sc, kernel, pool);
      double error2 = 0, bound2 = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], expected.out[i], expected.weight_bound[i] + 1e-5)
            << kernel.name << " " << describe(s) << " at " << i;
        error2 += (got[i] - expected.out[i]) * (got[i] - expected.out[i]);
        bound2 += expected.weight_bound[i] * expected.weight_bound[i];
      }
      EXPECT_LT(std::sqrt(error2), 0.25 * std::sqrt(bound2)) << kernel.name << " " << describe(s);
    }
  }
}

// Against the f32 cache: when every score of a query moves by at most delta (key and query
// quantization) each probability moves by a factor within [e^-2delta, e^2delta], so
//   |out_quantized - out_f32| <= (e^(2 delta) - 1) * max|v| + max|v_dequantized - v|
// plus the probabilities' quantization bound (dequantized_attention's weight_bound).
// The test measures delta and the value error per query from the cache's contents (not from
// the kernel) and holds the kernel's output to that bound; q8_0 must also keep the typical
// error small: its step is amax / 127 per 32 values, about 1% of a N(0,1) value's range, and
// the probabilities' 7-bit weights add an error of the same order (1.02% measured together),
// so the RMS output error stays under 1.25% of the output's RMS (q4_0's step, amax / 8,
// under 15%).
TEST(Attention, QuantizedCacheStaysWithinItsErrorBoundOfF32) {
  for (const Shape s : {Shape{12, 4, 64, 16, KvType::kQ8_0}, Shape{12, 4, 64, 16, KvType::kQ4_0},
                        Shape{8, 8, 16, 16, KvType::kQ8_0}}) {
    Scenario sc(s, 60, 130, 19);
    const Shape f32_shape{s.n_heads, s.n_kv_heads, s.head_dim, s.block_size, KvType::kF32};
    Scenario reference(f32_shape, 60, 130, 19);
    ThreadPool pool(2);
    const std::vector<float> exact = run(reference, select_attention_kernel(s.head_dim), pool);
    const std::vector<float> got = run(sc, select_attention_kernel(s.head_dim), pool);
    ContiguousKvStore kv(config_for(s), 2, 512, s.type, s.block_size);
    Attention::write_kv(kv, 1, sc.batch, sc.k.data(), sc.v.data());
    const std::vector<double> weight_bound = dequantized_attention(sc, kv).weight_bound;
    const KvLayout& layout = kv.layout();
    const int d = s.head_dim, q_row = s.n_heads * d, kv_row = s.n_kv_heads * d;
    std::vector<float> key(d), value(d);
    double error2 = 0, norm2 = 0;
    for (int i = 0; i < sc.batch.size(); ++i) {
      const int first = sc.batch.seq_ids[i] == 0 ? 0 : sc.len0;
      const auto table = kv.block_table(sc.batch.seq_ids[i]);
      for (int h = 0; h < s.n_heads; ++h) {
        const int kvh = h / (s.n_heads / s.n_kv_heads);
        const float* q = sc.q.data() + i * q_row + h * d;
        QuantizedQuery qq;
        quantize_query(layout, q, qq);
        double delta = 0, value_error = 0, max_value = 0;
        for (int t = 0; t <= sc.batch.positions[i]; ++t) {
          const uint8_t* block = kv.block_data(table[t / layout.block_size]);
          const int slot = t % layout.block_size;
          load_kv_row(layout, block + layout.offset(1, false, kvh), false, slot, key.data());
          load_kv_row(layout, block + layout.offset(1, true, kvh), true, slot, value.data());
          const float* k = sc.k.data() + (first + t) * kv_row + kvh * d;
          const float* v = sc.v.data() + (first + t) * kv_row + kvh * d;
          double exact_dot = 0, quantized_dot = 0;
          for (int e = 0; e < d; ++e) {
            exact_dot += double(q[e]) * k[e];
            quantized_dot += double(qq.q[e]) * qq.d[e / layout.group_size()] * key[e];
            value_error = std::max(value_error, std::fabs(double(value[e]) - v[e]));
            max_value = std::max(max_value, std::fabs(double(v[e])));
          }
          delta = std::max(delta, std::fabs(exact_dot - quantized_dot) / std::sqrt(double(d)));
        }
        const double bound = std::expm1(2 * delta) * max_value + value_error + 1e-5;
        for (int e = 0; e < d; ++e) {
          const size_t at = static_cast<size_t>(i) * q_row + h * d + e;
          ASSERT_LE(std::fabs(double(got[at]) - exact[at]), bound + weight_bound[at])
              << describe(s) << " token " << i << " head " << h << " delta " << delta;
          error2 += (double(got[at]) - exact[at]) * (got[at] - exact[at]);
          norm2 += double(exact[at]) * exact[at];
        }
      }
    }
    const double relative_rms = std::sqrt(error2 / norm2);
    EXPECT_LT(relative_rms, s.type == KvType::kQ8_0 ? 0.0125 : 0.15) << describe(s);
  }
}

}  // namespace
}  // namespace rapide
