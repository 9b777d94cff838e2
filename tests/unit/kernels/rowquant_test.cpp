// The row-wise quantized types (kernels/rowquant.h: Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K,
// IQ4_XS): block layouts, the scalar reference against a naive product of the dequantized
// weights and activations, every SIMD variant against the reference bit for bit, and the
// round-to-nearest quantizers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/rowquant.h"
#include "kernels/superblock_plan.h"
#include "weight_matrix_data.h"

namespace rapide {
namespace {

const TensorType kRowTypes[] = {TensorType::kQ4_1,   TensorType::kQ5_0, TensorType::kQ5_1,
                                TensorType::kIQ4_NL, TensorType::kQ2_K, TensorType::kQ3_K,
                                TensorType::kQ4_K,   TensorType::kQ5_K, TensorType::kQ6_K,
                                TensorType::kIQ4_XS};

bool is_k(TensorType t) {
  return tensor_type_block_size(t) == kSuperBlock;
}

// Byte offsets of each block's f16 fields (ggml-common.h).
std::vector<int> f16_offsets(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      return {0, 2};
    case TensorType::kQ2_K:
      return {80, 82};
    case TensorType::kQ3_K:
      return {108};
    case TensorType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// Random bytes everywhere (every sub-block scale, min, sign and bit pattern occurs: odd
// 6-bit scales, negative Q6_K scales, the top bits of packed Q4_K/Q3_K scales) except the
// f16 scales, which get finite values of either sign.
Matrix random_blocks(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  Matrix m;
  const int64_t row_bytes = tensor_row_bytes(type, cols);
  const int64_t block_bytes = tensor_type_block_bytes(type);
  m.bytes.resize(static_cast<size_t>(rows * row_bytes));
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
  for (size_t off = 0; off < m.bytes.size(); off += static_cast<size_t>(block_bytes)) {
    for (int f : f16_offsets(type)) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(m.bytes.data() + off + f, &h, 2);
    }
  }
  point_view(m, type, rows, cols);
  return m;
}

// The activations as llama.cpp's conversion for `type` leaves them (Q8_K for the k-quants,
// Q8_0 otherwise; Q8_1's q and d are Q8_0's).
std::vector<float> converted(TensorType type, const float* x, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols));
  const int block = is_k(type) ? kSuperBlock : 32;
  for (int64_t b = 0; b < cols; b += block) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < block; ++j) {
      if (std::fabs(x[b + j]) > amax) {
        amax = std::fabs(x[b + j]);
        max = x[b + j];
      }
    }
    for (int j = 0; j < block; ++j) {
      if (is_k(type)) {
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        const float q = std::fmin(127.0f, std::nearbyintf(iscale * x[b + j]));
        out[b + j] = amax != 0.0f ? q / iscale : 0.0f;
      } else {
        const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        out[b + j] = d * std::nearbyintf(x[b + j] * id);
      }
    }
  }
  return out;
}

TEST(RowQuant, BlockSizes) {
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ6_K), 210);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ4_K), 144);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ5_K), 176);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ3_K), 110);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ2_K), 84);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kIQ4_XS), 136);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ4_1), 20);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ5_0), 22);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kQ5_1), 24);
  EXPECT_EQ(tensor_type_block_bytes(TensorType::kIQ4_NL), 18);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ6_K, 512), 420);
  for (TensorType t : kRowTypes) {
    EXPECT_EQ(tensor_type_from_name(tensor_type_name(t)), t);
    EXPECT_TRUE(is_supported_tensor_type(static_cast<uint32_t>(t)));
  }
  EXPECT_EQ(tensor_type_from_name("q6_k"), TensorType::kQ6_K);
  EXPECT_EQ(tensor_type_from_name("Q4_K"), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_name(TensorType::kQ4_K), "q4_K");  // ggml's spelling
  EXPECT_EQ(static_cast<uint32_t>(TensorType::kQ6_K), 14u);
  EXPECT_EQ(static_cast<uint32_t>(TensorType::kIQ4_XS), 23u);
}

// Hand-built blocks with known values pin each bit layout to llama.cpp's.
TEST(RowQuant, DequantizeKnownBlocks) {
  {  // Q6_K: weight 128n + 32k + l: ql nibble, qh 2 bits, minus 32, times d * scale[e / 16].
    BlockQ6K b{};
    b.d = fp32_to_fp16(0.5f);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
    b.ql[0] = 0x21;   // e0: low 1; e64: low 2
    b.qh[0] = 0x9c;   // e0: hi 0; e32: hi 3; e64: hi 1; e96: hi 2
    b.ql[32] = 0x04;  // e32: low 4; e96: low 0
    float out[256];
    dequantize_row(TensorType::kQ6_K, &b, out, 256);
    EXPECT_EQ(out[0], 0.5f * -8 * (1 - 32));
    EXPECT_EQ(out[32], 0.5f * -6 * ((4 | 3 << 4) - 32));
    EXPECT_EQ(out[64], 0.5f * -4 * ((2 | 1 << 4) - 32));
    EXPECT_EQ(out[96], 0.5f * -2 * ((0 | 2 << 4) - 32));
  }
  {  // Q4_K: sub-block 5 takes its scale from byte 9's low nibble + byte 1's top bits.
    BlockQ4K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(0.25f);
    b.scales[1] = 0x40 | 3;  // sub-block 1: scale 3; sub-block 5: scale high bits 01
    b.scales[5] = 0x80 | 2;  // sub-block 1: min 2; sub-block 5: min high bits 10
    b.scales[9] = 0x76;      // sub-block 5: scale low 6, min low 7
    b.qs[0] = 0x00;
    b.qs[64 + 5] = 0xa0;  // weight 128 + 32 + 5 (sub-block 5): nibble 0xa
    b.qs[5] = 0x0f;       // weight 5 (sub-block 0): nibble 15, scale 0 -> -min*dmin = 0
    float out[256];
    dequantize_row(TensorType::kQ4_K, &b, out, 256);
    EXPECT_EQ(out[32], 1.0f * 3 * 0 - 0.25f * 2);
    EXPECT_EQ(out[165], 1.0f * (6 | 1 << 4) * 0xa - 0.25f * (7 | 2 << 4));
  }
  {  // Q5_0: the 5th bit of weight j + 16 is bit j + 16 of qh.
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(2.0f);
    b.qs[3] = 0x5a;
    const uint32_t qh = 1u << 19;
    std::memcpy(b.qh, &qh, 4);
    float out[32];
    dequantize_row(TensorType::kQ5_0, &b, out, 32);
    EXPECT_EQ(out[3], 2.0f * (0xa - 16));
    EXPECT_EQ(out[19], 2.0f * ((0x5 | 0x10) - 16));
  }
}

TEST(RowQuant, ReferenceMatchesNaiveProduct) {
  for (TensorType type : kRowTypes) {
    const int64_t cols = 512, rows = 37, n = 3;
    const Matrix m = random_blocks(type, rows, cols, 17);
    const WeightMatrix w = WeightMatrix::prepare(m.view);
    const std::vector<float> x = random_activations(n * cols, 4);
    std::vector<float> y(static_cast<size_t>(n * rows));
    w.multiply_reference(x.data(), n, y.data());
    std::vector<float> wr(static_cast<size_t>(cols));
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> xr = converted(type, x.data() + t * cols, cols);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(type, m.bytes.data() + r * tensor_row_bytes(type, cols), wr.data(), cols);
        double sum = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          sum += static_cast<double>(wr[c]) * xr[c];
          mag += std::fabs(static_cast<double>(wr[c]) * xr[c]);
        }
        // Q8_1's block sum s is f16-rounded (as llama.cpp's): ~1e-3 relative on the min term.
        EXPECT_NEAR(y[t * rows + r], sum, 2e-3 * mag + 1e-5)
            << tensor_type_name(type) << " t" << t << " r" << r;
      }
    }
  }
}

TEST(RowQuant, SimdVariantsMatchReference) {
  std::vector<IsaLevel> levels;
  if (cpu_features().best_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (cpu_features().best_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  ThreadPool pool(2);
  for (TensorType type : kRowTypes) {
    for (int64_t rows : {5, 16, 37, 100}) {
      const int64_t cols = is_k(type) ? 768 : 96;
      const Matrix m = random_blocks(type, rows, cols, static_cast<uint32_t>(rows));
      const WeightMatrix w = WeightMatrix::prepare(m.view);
      for (int64_t n : {1, 2, 7, 33}) {
        const std::vector<float> x = random_activations(n * cols, 9);
        std::vector<float> ref(static_cast<size_t>(n * rows));
        w.multiply_reference(x.data(), n, ref.data());
        for (IsaLevel level : levels) {
          std::vector<float> y(ref.size(), NAN);
          w.multiply_with(level, x.data(), n, y.data(), pool);
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(y[i], ref[i]) << tensor_type_name(type) << " " << isa_level_name(level) << " "
                                    << rows << " rows n" << n << " i" << i;
          }
        }
      }
    }
  }
}

// Each ISA's Q8_K activation quantizer against matmul::quantize_q8_k bit for bit: random
// rows, an all-zero super-block, ties of |x| (the first position wins, whatever its sign),
// a negative extreme and values that round exactly half-way.
TEST(RowQuant, Q8KQuantizerTwinsAreBitIdentical) {
  std::vector<matmul::QuantizeK8Kernel> twins;
  if (cpu_features().best_level() >= IsaLevel::kAvx2) {
    twins.push_back(matmul::avx2_kernels().quantize_q8_k);
  }
  if (cpu_features().best_level() >= IsaLevel::kAvx512) {
    twins.push_back(matmul::avx512_kernels().quantize_q8_k);
  }
  constexpr int64_t kCols = 4 * kSuperBlock;
  std::vector<float> x = random_activations(kCols, 21);
  std::fill(x.begin() + kSuperBlock, x.begin() + 2 * kSuperBlock, 0.0f);  // block 1: zeros
  x[2 * kSuperBlock + 40] = -3.0f;  // block 2: a tie of |x|, the negative one first
  x[2 * kSuperBlock + 200] = 3.0f;
  x[3 * kSuperBlock + 7] = -127.0f;  // block 3: iscale 1, so x = k + 0.5 rounds to even
  for (int j = 8; j < 40; ++j) x[3 * kSuperBlock + j] = static_cast<float>(j - 24) + 0.5f;
  std::vector<int8_t> q_ref(kCols), q(kCols);
  std::vector<float> d_ref(4), d(4);
  std::vector<int16_t> s_ref(64), s(64);
  matmul::quantize_q8_k(x.data(), kCols, q_ref.data(), d_ref.data(), s_ref.data());
  EXPECT_EQ(d_ref[1], 0.0f);
  EXPECT_EQ(q_ref[2 * kSuperBlock + 40], -127);  // the first of the tie sets the sign
  EXPECT_EQ(q_ref[2 * kSuperBlock + 200], 127);
  for (matmul::QuantizeK8Kernel twin : twins) {
    std::fill(q.begin(), q.end(), int8_t{99});
    twin(x.data(), kCols, q.data(), d.data(), s.data());
    for (int64_t i = 0; i < kCols; ++i) ASSERT_EQ(q[i], q_ref[i]) << "q " << i;
    for (int b = 0; b < 4; ++b) ASSERT_EQ(d[b], d_ref[b]) << "d " << b;
    for (int j = 0; j < 64; ++j) ASSERT_EQ(s[j], s_ref[j]) << "bsum " << j;
  }
}

// Q4_K, Q5_K and Q6_K are repacked into panels at prepare() (kernels/kpanel.h); their
// reference must still give llama.cpp's vec_dot result bit for bit: the row-wise dot
// product over the file's own blocks, activations converted to Q8_K.
TEST(RowQuant, PanelPackedKQuantsEqualRowDot) {
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    const int64_t cols = 768, rows = 19, n = 3;
    const Matrix m = random_blocks(type, rows, cols, 11);
    const WeightMatrix w = WeightMatrix::prepare(m.view);
    const std::vector<float> x = random_activations(n * cols, 5);
    std::vector<float> y(static_cast<size_t>(n * rows));
    w.multiply_reference(x.data(), n, y.data());
    std::vector<int8_t> q(cols);
    std::vector<float> d(cols / kSuperBlock);
    std::vector<int16_t> bsums(cols / 16);
    const matmul::RowDot dot = matmul::scalar::row_dot(type);
    for (int64_t t = 0; t < n; ++t) {
      matmul::quantize_q8_k(x.data() + t * cols, cols, q.data(), d.data(), bsums.data());
      const matmul::ActRow act{q.data(), d.data(), nullptr, bsums.data()};
      for (int64_t r = 0; r < rows; ++r) {
        const float expect =
            dot(m.bytes.data() + r * tensor_row_bytes(type, cols), cols / kSuperBlock, act);
        ASSERT_EQ(y[t * rows + r], expect) << tensor_type_name(type) << " t" << t << " r" << r;
      }
    }
  }
}

// Q/K/V-style groups of one row-wise type share one activation conversion: each output
// must equal the matrix's own multiply, whatever the thread count and token count; a
// Q4_K_M-style mix (Q4_K with Q6_K) falls back to one multiply per matrix.
TEST(RowQuant, GroupMultiplyEqualsEachMultiply) {
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kQ5_1}) {
    const Matrix a = random_blocks(type, 40, 512, 1), b = random_blocks(type, 33, 512, 2);
    const WeightMatrix wa = WeightMatrix::prepare(a.view), wb = WeightMatrix::prepare(b.view);
    for (int64_t n : {1, 5, 40}) {
      const std::vector<float> x = random_activations(n * 512, 7);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> ya(n * 40), yb(n * 33), ea(ya.size()), eb(yb.size());
        wa.multiply(x.data(), n, ea.data(), pool);
        wb.multiply(x.data(), n, eb.data(), pool);
        const WeightMatrix* ws[] = {&wa, &wb};
        float* const ys[] = {ya.data(), yb.data()};
        WeightMatrix::multiply_group(ws, x.data(), n, ys, pool);
        EXPECT_EQ(ya, ea) << tensor_type_name(type) << " n=" << n << " threads=" << threads;
        EXPECT_EQ(yb, eb) << tensor_type_name(type) << " n=" << n << " threads=" << threads;
      }
    }
  }
  // K-quant panels of different types share one dispatch (Q4_K_M's Q4_K key, Q6_K value):
  // small (one thread) and large enough to be split across threads, decode and prefill.
  for (int64_t rows : {24, 300}) {
    const Matrix k4 = random_blocks(TensorType::kQ4_K, rows, 512, 3),
                 k5 = random_blocks(TensorType::kQ5_K, rows / 2, 512, 5),
                 k6 = random_blocks(TensorType::kQ6_K, rows + 16, 512, 4);
    const WeightMatrix w4 = WeightMatrix::prepare(k4.view), w5 = WeightMatrix::prepare(k5.view),
                       w6 = WeightMatrix::prepare(k6.view);
    for (int64_t n : {1, 3, 40}) {
      const std::vector<float> x = random_activations(n * 512, 8);
      ThreadPool pool(2);
      std::vector<float> y4(n * rows), y5(n * (rows / 2)), y6(n * (rows + 16));
      std::vector<float> e4(y4.size()), e5(y5.size()), e6(y6.size());
      w4.multiply_reference(x.data(), n, e4.data());
      w5.multiply_reference(x.data(), n, e5.data());
      w6.multiply_reference(x.data(), n, e6.data());
      const WeightMatrix* ws[] = {&w4, &w5, &w6};
      float* const ys[] = {y4.data(), y5.data(), y6.data()};
      WeightMatrix::multiply_group(ws, x.data(), n, ys, pool);
      EXPECT_EQ(y4, e4) << rows << " rows n=" << n;
      EXPECT_EQ(y5, e5) << rows << " rows n=" << n;
      EXPECT_EQ(y6, e6) << rows << " rows n=" << n;
    }
  }
}

TEST(RowQuant, PrepareRowsIsAShard) {
  for (TensorType type : {TensorType::kQ4_K, TensorType::kQ5_0}) {
    const Matrix m = random_blocks(type, 70, 256, 6);
    const WeightMatrix full = WeightMatrix::prepare(m.view);
    const WeightMatrix shard = WeightMatrix::prepare_rows(m.view, 21, 50);
    ASSERT_EQ(shard.rows(), 29);
    const std::vector<float> x = random_activations(5 * 256, 1);
    std::vector<float> yf(5 * 70), ys(5 * 29);
    ThreadPool pool(2);
    full.multiply(x.data(), 5, yf.data(), pool);
    shard.multiply(x.data(), 5, ys.data(), pool);
    for (int t = 0; t < 5; ++t) {
      for (int r = 0; r < 29; ++r) {
        ASSERT_EQ(ys[t * 29 + r], yf[t * 70 + 21 + r]) << tensor_type_name(type);
      }
    }
  }
}

TEST(RowQuant, DequantizeRowOfPreparedMatrix) {
  for (TensorType type : kRowTypes) {
    const int64_t cols = 512;
    const Matrix m = random_blocks(type, 21, cols, 3);
    const WeightMatrix w = WeightMatrix::prepare(m.view);
    std::vector<float> a(cols), b(cols);
    for (int64_t r = 0; r < 21; ++r) {
      w.dequantize_row(r, a.data());
      dequantize_row(type, m.bytes.data() + r * tensor_row_bytes(type, cols), b.data(), cols);
      ASSERT_EQ(a, b) << tensor_type_name(type) << " row " << r;
    }
  }
}

// Round-to-nearest: the error of each weight is bounded by the type's step at the row's
// scale (generous bounds: the point is that the packing and unpacking agree).
TEST(RowQuant, QuantizeRoundTrips) {
  struct Case {
    TensorType type;
    float tol;  // relative to the block's max |x|
  };
  for (Case c : {Case{TensorType::kQ4_1, 0.07f}, Case{TensorType::kQ5_0, 0.04f},
                 Case{TensorType::kQ5_1, 0.04f}, Case{TensorType::kIQ4_NL, 0.12f},
                 Case{TensorType::kQ2_K, 0.45f}, Case{TensorType::kQ3_K, 0.2f},
                 Case{TensorType::kQ4_K, 0.1f}, Case{TensorType::kQ5_K, 0.05f},
                 Case{TensorType::kQ6_K, 0.03f}, Case{TensorType::kIQ4_XS, 0.12f}}) {
    const int64_t n = 1024;
    const std::vector<float> x = random_activations(n, 21);
    std::vector<uint8_t> q(static_cast<size_t>(tensor_row_bytes(c.type, n)));
    quantize_row(c.type, x.data(), q.data(), n);
    std::vector<float> back(n);
    dequantize_row(c.type, q.data(), back.data(), n);
    float amax = 0.0f;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    double err = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(std::fabs(back[i] - x[i]), c.tol * amax) << tensor_type_name(c.type) << " " << i;
      err += std::fabs(back[i] - x[i]);
    }
    std::printf("%-7s mean |err| %.4f\n", std::string(tensor_type_name(c.type)).c_str(), err / n);
    // A zero row stays zero.
    std::vector<float> zeros(n, 0.0f), out(n, 1.0f);
    quantize_row(c.type, zeros.data(), q.data(), n);
    dequantize_row(c.type, q.data(), out.data(), n);
    for (float v : out) ASSERT_EQ(v, 0.0f) << tensor_type_name(c.type);
  }
}

// The searched scales (llama.cpp's make_qkx2_quants) must fit weights better than the
// round-to-nearest ranges they replace: lower RMS error on Gaussian weights, as a trained
// model's are, and on the heavy-tailed activations-like data of random_activations.
TEST(RowQuant, SearchedScalesLowerTheError) {
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<float> normal(16 * 1024);
  for (float& v : normal) v = gauss(rng);
  const std::vector<float> other = random_activations(16 * 1024, 3);
  for (TensorType type : {TensorType::kQ2_K, TensorType::kQ4_K, TensorType::kQ5_K}) {
    for (const std::vector<float>* x :
         std::initializer_list<const std::vector<float>*>{&normal, &other}) {
      const int64_t n = static_cast<int64_t>(x->size());
      auto rms_error = [&](matmul::ScaleSearch search) {
        std::vector<uint8_t> q(static_cast<size_t>(tensor_row_bytes(type, n)));
        matmul::quantize_row_blocks(type, x->data(), q.data(), n, search);
        std::vector<float> back(static_cast<size_t>(n));
        dequantize_row(type, q.data(), back.data(), n);
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += std::pow(static_cast<double>(back[i]) - (*x)[i], 2);
        return std::sqrt(sum / static_cast<double>(n));
      };
      const double rtn = rms_error(matmul::ScaleSearch::kRoundToNearest);
      const double searched = rms_error(matmul::ScaleSearch::kSearch);
      std::printf("%-5s %s: RMS error round-to-nearest %.3g, searched %.3g (%.1f %% lower)\n",
                  std::string(tensor_type_name(type)).c_str(),
                  x == &normal ? "gaussian" : "mixed   ", rtn, searched,
                  100.0 * (1.0 - searched / rtn));
      EXPECT_LT(searched, 0.97 * rtn) << tensor_type_name(type);
    }
  }
}

// The seam GPTQ rounds through for the 256-weight types: a plan packs to exactly the bytes
// quantize_row writes, superblock_value is what dequantize_row reads back for every code of
// every weight, and superblock_nearest finds the nearest of those values.
TEST(RowQuant, SuperBlockPlanIsTheQuantizersSeam) {
  const std::vector<float> x = random_activations(4 * kSuperBlock, 31);
  for (TensorType type : kRowTypes) {
    if (!is_k(type)) {
      EXPECT_FALSE(matmul::has_superblock_plan(type));
      continue;
    }
    SCOPED_TRACE(tensor_type_name(type));
    ASSERT_TRUE(matmul::has_superblock_plan(type));
    const int64_t bytes = tensor_type_block_bytes(type);
    std::vector<uint8_t> row(static_cast<size_t>(tensor_row_bytes(type, 4 * kSuperBlock)));
    quantize_row(type, x.data(), row.data(), 4 * kSuperBlock);
    for (int b = 0; b < 4; ++b) {
      matmul::SuperBlockPlan p = matmul::plan_superblock(type, x.data() + b * kSuperBlock);
      std::vector<uint8_t> packed(static_cast<size_t>(bytes));
      matmul::pack_superblock(p, packed.data());
      ASSERT_EQ(0, std::memcmp(packed.data(), row.data() + b * bytes, bytes)) << "block " << b;
      // Every code of weight e, written and read back through the real layout.
      const int lo = type == TensorType::kQ3_K ? -4 : type == TensorType::kQ6_K ? -32 : 0;
      const int hi = type == TensorType::kQ2_K   ? 3
                     : type == TensorType::kQ3_K ? 3
                     : type == TensorType::kQ5_K ? 31
                     : type == TensorType::kQ6_K ? 31
                                                 : 15;
      for (int e : {0, 17, 100, 255}) {
        for (int c = lo; c <= hi; ++c) {
          matmul::SuperBlockPlan q = p;
          q.code[e] = c;
          matmul::pack_superblock(q, packed.data());
          std::vector<float> back(kSuperBlock);
          dequantize_row(type, packed.data(), back.data(), kSuperBlock);
          ASSERT_NEAR(back[e], matmul::superblock_value(q, e, c), 1e-6f * (1 + std::fabs(back[e])))
              << "weight " << e << " code " << c;
        }
        // Nearest: no code's value is closer to the probe than the chosen one's.
        for (float v : {x[b * kSuperBlock + e], 0.0f, 0.37f * x[b * kSuperBlock + e] + 0.01f}) {
          const float got = matmul::superblock_value(p, e, matmul::superblock_nearest(p, e, v));
          for (int c = lo; c <= hi; ++c) {
            EXPECT_LE(std::fabs(got - v), std::fabs(matmul::superblock_value(p, e, c) - v) + 1e-6f)
                << "weight " << e << " value " << v << " code " << c;
          }
        }
      }
    }
  }
  EXPECT_FALSE(matmul::has_superblock_plan(TensorType::kQ8_0));
}

}  // namespace
}  // namespace rapide
