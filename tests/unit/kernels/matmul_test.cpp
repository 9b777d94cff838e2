// WeightMatrix: packing, the scalar reference against a naive double-precision product,
// and every SIMD variant this CPU runs against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "weight_matrix_data.h"

namespace rapide {
namespace {

Matrix make_matrix(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Matrix m;
  const int64_t row_bytes = tensor_row_bytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rows * row_bytes));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    quantize_row(type, row.data(), m.bytes.data() + r * row_bytes, cols);
  }
  point_view(m, type, rows, cols);
  return m;
}

// Activations as each weight type's numerics see them (llama.cpp's conventions).
std::vector<float> rounded_activations(TensorType type, const float* x, int64_t cols) {
  std::vector<float> out(x, x + cols);
  for (int64_t b = 0; b < cols; b += kQuantBlock) {
    switch (type) {
      case TensorType::kF32:
        break;
      case TensorType::kF16:
        for (int64_t c = b; c < std::min(cols, b + kQuantBlock); ++c) {
          out[c] = fp16_to_fp32(fp32_to_fp16(x[c]));
        }
        break;
      case TensorType::kBF16:
        for (int64_t c = b; c < std::min(cols, b + kQuantBlock); ++c) {
          out[c] = bf16_to_fp32(fp32_to_bf16(x[c]));
        }
        break;
      case TensorType::kQ8_0:
      case TensorType::kQ4_0: {
        float amax = 0;
        for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[b + j]));
        const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
        const float id = amax != 0 ? 127.0f / amax : 0.0f;
        for (int j = 0; j < kQuantBlock; ++j) out[b + j] = d * std::nearbyintf(x[b + j] * id);
        break;
      }
      default:  // the row-wise types have their own test (rowquant_test.cpp)
        break;
    }
  }
  return out;
}

const TensorType kTypes[] = {TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                             TensorType::kQ8_0, TensorType::kQ4_0};

struct Shape {
  int64_t rows, cols;
};
// Rows that are not multiples of the 16-row panel or of any register tile.
const Shape kShapes[] = {{16, 32}, {37, 64}, {100, 96}, {161, 256}, {5, 32}};
const int64_t kTokens[] = {1, 2, 3, 6, 8, 12, 17, 64};

// Every ISA level this CPU runs, the scalar reference first.
std::vector<IsaLevel> runnable_levels() {
  std::vector<IsaLevel> levels = {IsaLevel::kScalar};
  if (cpu_features().best_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (cpu_features().best_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  return levels;
}

TEST(WeightMatrix, ReferenceMatchesNaiveProduct) {
  for (TensorType type : kTypes) {
    for (Shape s : kShapes) {
      const Matrix m = make_matrix(type, s.rows, s.cols, 11);
      const WeightMatrix w = WeightMatrix::prepare(m.view);
      ASSERT_EQ(w.rows(), s.rows);
      ASSERT_EQ(w.cols(), s.cols);
      ASSERT_EQ(w.type(), type);
      const int64_t n = 3;
      const std::vector<float> x = random_activations(n * s.cols, 5);
      std::vector<float> y(static_cast<size_t>(n * s.rows));
      w.multiply_reference(x.data(), n, y.data());
      const int64_t row_bytes = tensor_row_bytes(type, s.cols);
      std::vector<float> wr(static_cast<size_t>(s.cols));
      for (int64_t t = 0; t < n; ++t) {
        const std::vector<float> xr = rounded_activations(type, x.data() + t * s.cols, s.cols);
        for (int64_t r = 0; r < s.rows; ++r) {
          dequantize_row(type, m.bytes.data() + r * row_bytes, wr.data(), s.cols);
          double sum = 0, mag = 0;
          for (int64_t c = 0; c < s.cols; ++c) {
            sum += static_cast<double>(wr[c]) * xr[c];
            mag += std::fabs(static_cast<double>(wr[c]) * xr[c]);
          }
          EXPECT_NEAR(y[t * s.rows + r], sum, 1e-5 * mag + 1e-6)
              << tensor_type_name(type) << " " << s.rows << "x" << s.cols << " t" << t << " r" << r;
        }
      }
    }
  }
}

// Every runnable ISA variant of w times x (n tokens) against the reference kernel: identical
// bits (same packed layout, same summation order, same integer math), except vdpbf16ps,
// which flushes subnormals (none here) and may differ by ulps.
void expect_variants_match_reference(const WeightMatrix& w, TensorType type,
                                     const std::vector<float>& x, int64_t n, ThreadPool& pool,
                                     const std::string& what) {
  std::vector<float> ref(static_cast<size_t>(n * w.rows()));
  w.multiply_reference(x.data(), n, ref.data());
  for (IsaLevel level : runnable_levels()) {
    std::vector<float> y(ref.size(), NAN);
    w.multiply_with(level, x.data(), n, y.data(), pool);
    for (size_t i = 0; i < y.size(); ++i) {
      if (type == TensorType::kBF16) {
        ASSERT_NEAR(y[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i])));
      } else {
        ASSERT_EQ(y[i], ref[i]) << tensor_type_name(type) << " " << isa_level_name(level) << " "
                                << what << " n" << n << " i" << i;
      }
    }
  }
}

TEST(WeightMatrix, SimdVariantsMatchReference) {
  ThreadPool pool(2);
  for (TensorType type : kTypes) {
    for (Shape s : kShapes) {
      const Matrix m = make_matrix(type, s.rows, s.cols, 3);
      const WeightMatrix w = WeightMatrix::prepare(m.view);
      for (int64_t n : kTokens) {
        expect_variants_match_reference(w, type, random_activations(n * s.cols, 9), n, pool,
                                        std::to_string(s.rows) + "x" + std::to_string(s.cols));
      }
    }
  }
}

// Decode of a few tokens over a tall matrix: the float tiles (1-12 tokens) and the
// Q8_0/Q4_0 ones (3-6) then stream their panels spread over each piece (drive_spread in
// matmul_drive.h), with leftovers; pieces of 8 panels with two threads, the whole matrix as
// one with one thread. 2053 rows: 129 panels, the last one partial.
// Each ISA's Q8_0 activation quantizer (Q8_0 / Q4_0 products) against the scalar one, bit
// for bit: 13 blocks (the AVX-512 one takes four at a time, then the rest one by one), an
// all-zero block, halves that round to even (amax 127: the inverse scale is 1), a negative
// extreme, a block of tiny values, for each bias offset the kernel sets use.
TEST(WeightMatrix, Q8ActivationQuantizerTwinsAreBitIdentical) {
  std::vector<matmul::QuantizeKernel> twins;
  if (cpu_features().best_level() >= IsaLevel::kAvx2) {
    twins.push_back(matmul::avx2_kernels().quantize_q8);
  }
  if (cpu_features().best_level() >= IsaLevel::kAvx512) {
    twins.push_back(matmul::avx512_kernels().quantize_q8);
  }
  constexpr int64_t kBlocks = 13, kCols = kBlocks * kQuantBlock;
  std::vector<float> x = random_activations(kCols, 23);
  std::fill(x.begin() + kQuantBlock, x.begin() + 2 * kQuantBlock, 0.0f);  // block 1: zeros
  float* b2 = x.data() + 2 * kQuantBlock;  // block 2: x * 127 / 127, halves round to even
  b2[0] = -127.0f;
  for (int j = 1; j < kQuantBlock; ++j) b2[j] = static_cast<float>(j - 16) + 0.5f;
  for (int j = 0; j < kQuantBlock; ++j) x[5 * kQuantBlock + j] *= 1e-30f;  // block 5: tiny
  x[9 * kQuantBlock + 3] = 1e6f;                                           // block 9: one large
  std::vector<int8_t> q_ref(kCols), q(kCols);
  std::vector<float> d_ref(kBlocks), d(kBlocks);
  std::vector<int32_t> bias_ref(kBlocks), bias(kBlocks);
  for (int offset : {0, 8, 128}) {
    matmul::reference_kernels().quantize_q8(x.data(), kCols, offset, q_ref.data(), d_ref.data(),
                                            bias_ref.data());
    EXPECT_EQ(d_ref[1], 0.0f);
    EXPECT_EQ(q_ref[2 * kQuantBlock + 1], -14);  // -14.5 to even
    EXPECT_EQ(q_ref[2 * kQuantBlock + 2], -14);  // -13.5 to even
    for (matmul::QuantizeKernel twin : twins) {
      std::fill(q.begin(), q.end(), int8_t{99});
      twin(x.data(), kCols, offset, q.data(), d.data(), bias.data());
      for (int64_t i = 0; i < kCols; ++i) ASSERT_EQ(q[i], q_ref[i]) << "q " << i;
      for (int64_t b = 0; b < kBlocks; ++b) {
        ASSERT_EQ(std::memcmp(&d[b], &d_ref[b], sizeof(float)), 0) << "d " << b;
        ASSERT_EQ(bias[b], bias_ref[b]) << "bias " << b << " offset " << offset;
      }
    }
  }
}

TEST(WeightMatrix, DecodeOverManyPanelsMatchesReference) {
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0,
                          TensorType::kQ4_0}) {
    const Matrix m = make_matrix(type, 2053, 64, 5);
    const WeightMatrix w = WeightMatrix::prepare(m.view);
    for (int64_t n : {1, 2, 3, 5, 6, 8, 12}) {
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        expect_variants_match_reference(w, type, random_activations(n * 64, 13), n, pool,
                                        std::to_string(threads) + " threads");
      }
    }
  }
}

// ActQuant::kBf16 on F16 weights: the oracle is a double-precision product of the weights
// and activations each rounded to bf16 independently of the kernels (fp32_to_bf16 of the
// dequantized f16 value); every ISA variant computes it, and it stays close to the F16 path.
TEST(WeightMatrix, Bf16ModeRunsF16WeightsAsBf16) {
  const std::vector<IsaLevel> levels = runnable_levels();
  ThreadPool pool(2);
  auto bf16 = [](float v) { return static_cast<double>(bf16_to_fp32(fp32_to_bf16(v))); };
  for (Shape s : kShapes) {
    const Matrix m = make_matrix(TensorType::kF16, s.rows, s.cols, 21);
    const WeightMatrix w = WeightMatrix::prepare(m.view, ActQuant::kBf16);
    const WeightMatrix exact = WeightMatrix::prepare(m.view, ActQuant::kInt8);
    EXPECT_EQ(w.type(), TensorType::kBF16);
    EXPECT_EQ(exact.type(), TensorType::kF16);
    std::vector<float> wr(static_cast<size_t>(s.cols));
    for (int64_t n : {int64_t{1}, int64_t{17}}) {
      const std::vector<float> x = random_activations(n * s.cols, 23);
      std::vector<float> f16(static_cast<size_t>(n * s.rows));
      exact.multiply_reference(x.data(), n, f16.data());
      for (IsaLevel level : levels) {
        std::vector<float> y(f16.size(), NAN);
        w.multiply_with(level, x.data(), n, y.data(), pool);
        for (int64_t r = 0; r < s.rows; ++r) {
          dequantize_row(TensorType::kF16, m.bytes.data() + r * s.cols * 2, wr.data(), s.cols);
          for (int64_t t = 0; t < n; ++t) {
            double sum = 0, mag = 0;
            for (int64_t c = 0; c < s.cols; ++c) {
              const double p = bf16(wr[c]) * bf16(x[t * s.cols + c]);
              sum += p;
              mag += std::fabs(p);
            }
            const float got = y[t * s.rows + r];
            ASSERT_NEAR(got, sum, 1e-5 * mag + 1e-6)
                << isa_level_name(level) << " " << s.rows << "x" << s.cols << " t" << t;
            // bf16 keeps 8 significant bits of each factor: relative error per product
            // below 2^-7, so the sum moves by less than mag / 128 from the F16 path.
            ASSERT_NEAR(got, f16[t * s.rows + r], mag / 128);
          }
        }
      }
    }
  }
  EXPECT_EQ(act_quant_from_name("bf16"), ActQuant::kBf16);
  EXPECT_EQ(act_quant_from_name("off"), ActQuant::kOff);
  EXPECT_THROW(act_quant_from_name("fp8"), Error);
}

TEST(WeightMatrix, LargeBatchSplitsAcrossThreadsIdentically) {
  // Few rows and many tokens take the split over tokens; results must not change.
  const Matrix m = make_matrix(TensorType::kQ8_0, 48, 128, 4);
  const WeightMatrix w = WeightMatrix::prepare(m.view);
  const int64_t n = 130;
  const std::vector<float> x = random_activations(n * 128, 2);
  std::vector<float> ref(static_cast<size_t>(n * 48)), y(ref.size());
  w.multiply_reference(x.data(), n, ref.data());
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    w.multiply(x.data(), n, y.data(), pool);
    EXPECT_EQ(y, ref) << threads;
  }
}

// Q/K/V and gate/up go through multiply_group: each output must be bit-identical to the
// matrix's own multiply, whatever the thread count, token count and row counts (panel ranges
// of the pool's chunks straddle the matrices' boundaries); mixed types fall back per matrix.
TEST(WeightMatrix, GroupMultiplyEqualsEachMultiply) {
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kF16}) {
    const Matrix a = make_matrix(type, 96, 128, 1), b = make_matrix(type, 40, 128, 2),
                 c = make_matrix(type, 33, 128, 3);
    const WeightMatrix wa = WeightMatrix::prepare(a.view), wb = WeightMatrix::prepare(b.view),
                       wc = WeightMatrix::prepare(c.view);
    for (int64_t n : {1, 3, 70}) {
      const std::vector<float> x = random_activations(n * 128, 7);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> ya(n * 96), yb(n * 40), yc(n * 33);
        std::vector<float> ea(ya.size()), eb(yb.size()), ec(yc.size());
        wa.multiply(x.data(), n, ea.data(), pool);
        wb.multiply(x.data(), n, eb.data(), pool);
        wc.multiply(x.data(), n, ec.data(), pool);
        const WeightMatrix* ws[] = {&wa, &wb, &wc};
        float* const ys[] = {ya.data(), yb.data(), yc.data()};
        WeightMatrix::multiply_group(ws, x.data(), n, ys, pool);
        EXPECT_EQ(ya, ea) << tensor_type_name(type) << " n=" << n << " threads=" << threads;
        EXPECT_EQ(yb, eb) << tensor_type_name(type) << " n=" << n << " threads=" << threads;
        EXPECT_EQ(yc, ec) << tensor_type_name(type) << " n=" << n << " threads=" << threads;
      }
    }
  }
  // Different types: each matrix on its own.
  const Matrix q8 = make_matrix(TensorType::kQ8_0, 32, 64, 4),
               f16 = make_matrix(TensorType::kF16, 16, 64, 5);
  const WeightMatrix w8 = WeightMatrix::prepare(q8.view), w16 = WeightMatrix::prepare(f16.view);
  const std::vector<float> x = random_activations(2 * 64, 8);
  ThreadPool pool(2);
  std::vector<float> y8(2 * 32), y16(2 * 16), e8(y8.size()), e16(y16.size());
  w8.multiply(x.data(), 2, e8.data(), pool);
  w16.multiply(x.data(), 2, e16.data(), pool);
  const WeightMatrix* ws[] = {&w8, &w16};
  float* const ys[] = {y8.data(), y16.data()};
  WeightMatrix::multiply_group(ws, x.data(), 2, ys, pool);
  EXPECT_EQ(y8, e8);
  EXPECT_EQ(y16, e16);
}

// Input::kF16Exact: a producer that rounded its rows to f16 (round_to_f16) hands them to F16
// products, which then skip their own rounding pass: the same bits as multiply on the
// unrounded x, for every ISA variant, decode-sized and batched, one matrix and a group,
// 1-3 threads. Only F16 weights (not prepared as BF16) round their input.
TEST(WeightMatrix, F16ExactInputGivesTheSameBits) {
  const Matrix a = make_matrix(TensorType::kF16, 96, 128, 31),
               b = make_matrix(TensorType::kF16, 40, 128, 32);
  const WeightMatrix wa = WeightMatrix::prepare(a.view), wb = WeightMatrix::prepare(b.view);
  const WeightMatrix* group[] = {&wa, &wb};
  EXPECT_TRUE(wa.rounds_input_to_f16());
  EXPECT_TRUE(WeightMatrix::all_round_input_to_f16(group));
  const Matrix q8 = make_matrix(TensorType::kQ8_0, 32, 128, 33);
  const WeightMatrix w8 = WeightMatrix::prepare(q8.view);
  const WeightMatrix* mixed[] = {&wa, &w8};
  EXPECT_FALSE(w8.rounds_input_to_f16());
  EXPECT_FALSE(WeightMatrix::all_round_input_to_f16(mixed));
  EXPECT_FALSE(WeightMatrix::all_round_input_to_f16({}));
  // kOff concerns quantized weights only: F16 keeps its kernel.
  EXPECT_TRUE(WeightMatrix::prepare(a.view, ActQuant::kOff).rounds_input_to_f16());
  EXPECT_FALSE(WeightMatrix::prepare(q8.view, ActQuant::kOff).rounds_input_to_f16());
  EXPECT_FALSE(WeightMatrix::prepare(a.view, ActQuant::kBf16).rounds_input_to_f16());
  EXPECT_FALSE(WeightMatrix().rounds_input_to_f16());
  for (int64_t n : {1, 5, 32, 70}) {
    std::vector<float> x = random_activations(n * 128, 34);
    x[3] = 1e-6f;     // an f16 subnormal
    x[5] = 70000.0f;  // beyond f16's range: rounds to infinity, both ways
    std::vector<float> rounded(x.size());
    round_to_f16(x.data(), rounded.data(), static_cast<int64_t>(x.size()));
    std::vector<float> in_place = x;
    round_to_f16(in_place.data(), in_place.data(), static_cast<int64_t>(in_place.size()));
    ASSERT_EQ(std::memcmp(in_place.data(), rounded.data(), x.size() * sizeof(float)), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(rounded[i], fp16_to_fp32(fp32_to_fp16(x[i]))) << i;
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (IsaLevel level : runnable_levels()) {
        std::vector<float> ea(n * 96), ya(ea.size(), NAN);
        wa.multiply_with(level, x.data(), n, ea.data(), pool);
        wa.multiply_with(level, rounded.data(), n, ya.data(), pool, WeightMatrix::Input::kF16Exact);
        EXPECT_EQ(std::memcmp(ya.data(), ea.data(), ea.size() * sizeof(float)), 0)
            << isa_level_name(level) << " n=" << n << " threads=" << threads;
      }
      std::vector<float> ea(n * 96), eb(n * 40), ya(ea.size(), NAN), yb(eb.size(), NAN);
      float* const expected[] = {ea.data(), eb.data()};
      float* const got[] = {ya.data(), yb.data()};
      WeightMatrix::multiply_group(group, x.data(), n, expected, pool);
      WeightMatrix::multiply_group(group, rounded.data(), n, got, pool,
                                   WeightMatrix::Input::kF16Exact);
      EXPECT_EQ(std::memcmp(ya.data(), ea.data(), ea.size() * sizeof(float)), 0) << n;
      EXPECT_EQ(std::memcmp(yb.data(), eb.data(), eb.size() * sizeof(float)), 0) << n;
    }
  }
}

// stream_next only names what the threads prefetch while they wait: the products that follow
// it are bit-identical to those without it, for groups run in one dispatch or matrix by
// matrix, decode-sized or not, and for a group it cannot use (empty, unprepared).
TEST(WeightMatrix, StreamNextIsOnlyAHint) {
  const Matrix a = make_matrix(TensorType::kQ8_0, 96, 128, 1),
               b = make_matrix(TensorType::kQ8_0, 40, 128, 2),
               c = make_matrix(TensorType::kF16, 64, 96, 3);
  const WeightMatrix wa = WeightMatrix::prepare(a.view), wb = WeightMatrix::prepare(b.view),
                     wc = WeightMatrix::prepare(c.view), none;
  const WeightMatrix* group[] = {&wa, &wb};
  const WeightMatrix* mixed[] = {&wc, &wa};
  const WeightMatrix* empty[] = {&none};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 4, 40}) {
      const std::vector<float> x = random_activations(n * 128, 5),
                               xc = random_activations(n * 96, 6);
      std::vector<float> ea(n * 96), eb(n * 40), ec(n * 64);
      wa.multiply(x.data(), n, ea.data(), pool);
      wb.multiply(x.data(), n, eb.data(), pool);
      wc.multiply(xc.data(), n, ec.data(), pool);
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> ya(ea.size()), yb(eb.size()), yc(ec.size());
        float* const ys[] = {ya.data(), yb.data()};
        WeightMatrix::stream_next(mixed, n, pool);
        WeightMatrix::multiply_group(group, x.data(), n, ys, pool);
        WeightMatrix::stream_next(group, n, pool);
        wc.multiply(xc.data(), n, yc.data(), pool);
        WeightMatrix::stream_next(empty, n, pool);
        WeightMatrix::stream_next({}, n, pool);
        EXPECT_EQ(ya, ea) << "n=" << n << " threads=" << threads;
        EXPECT_EQ(yb, eb) << "n=" << n << " threads=" << threads;
        EXPECT_EQ(yc, ec) << "n=" << n << " threads=" << threads;
      }
    }
  }
}

TEST(WeightMatrix, DequantizeRowMatchesStorage) {
  for (TensorType type : kTypes) {
    const Matrix m = make_matrix(type, 37, 96, 8);
    const WeightMatrix w = WeightMatrix::prepare(m.view);
    std::vector<float> a(96), b(96);
    for (int64_t r = 0; r < 37; ++r) {
      w.dequantize_row(r, a.data());
      dequantize_row(type, m.bytes.data() + r * tensor_row_bytes(type, 96), b.data(), 96);
      ASSERT_EQ(a, b) << tensor_type_name(type) << " row " << r;
    }
    EXPECT_THROW(w.dequantize_row(37, a.data()), Error);
  }
}

TEST(WeightMatrix, PrepareRowsIsAShard) {
  const Matrix m = make_matrix(TensorType::kQ4_0, 70, 64, 6);
  const WeightMatrix full = WeightMatrix::prepare(m.view);
  const WeightMatrix shard = WeightMatrix::prepare_rows(m.view, 21, 50);
  ASSERT_EQ(shard.rows(), 29);
  const std::vector<float> x = random_activations(2 * 64, 1);
  std::vector<float> yf(2 * 70), ys(2 * 29);
  ThreadPool pool(2);
  full.multiply(x.data(), 2, yf.data(), pool);
  shard.multiply(x.data(), 2, ys.data(), pool);
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < 29; ++r) EXPECT_EQ(ys[t * 29 + r], yf[t * 70 + 21 + r]);
  }
}

TEST(WeightMatrix, RejectsBadTensors) {
  Matrix m = make_matrix(TensorType::kQ8_0, 4, 64, 1);
  TensorView v = m.view;
  v.shape = {64, 2, 2};
  EXPECT_THROW(WeightMatrix::prepare(v), Error);
  v = m.view;
  v.shape = {48, 4};  // not a multiple of the 32-weight block
  EXPECT_THROW(WeightMatrix::prepare(v), Error);
  v = m.view;
  v.size_bytes = 10;
  EXPECT_THROW(WeightMatrix::prepare(v), Error);
  EXPECT_THROW(WeightMatrix::prepare_rows(m.view, 3, 2), Error);
  v = m.view;
  v.type = static_cast<TensorType>(12);
  EXPECT_THROW(WeightMatrix::prepare(v), Error);
}

}  // namespace
}  // namespace rapide
