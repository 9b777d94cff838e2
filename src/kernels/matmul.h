// Matrix products between model weights and activations: the engine's hot path.
//
// Numerics follow llama.cpp so greedy outputs match its reference runs:
//   F32 weights:        f32 activations, f32 accumulation
//   F16 weights:        activations rounded to f16, products accumulated in f32
//   BF16 weights:       activations rounded to bf16, products accumulated in f32
//   Q8_0 / Q4_0 weights: activations quantized to Q8_0 as llama.cpp's x86 quantize_row_q8_0
//                        does (scale 127/amax, round half to even, f16 block scale), exact
//                        integer dot products per block, scaled and summed in f32
//   Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS: llama.cpp's vec_dot structure over the
//                        file's own blocks, activations as Q8_0 / Q8_1 / Q8_K
//                        (kernels/rowquant.h)
// Each kernel family has a scalar reference (tests compare every SIMD variant against it);
// the SIMD variants (AVX2; AVX-512 with VNNI and BF16) follow the reference's summation
// order, so all but BF16's vdpbf16ps reproduce it bit for bit. prepare() repacks the
// weights into 16-row panels (layout in matmul_internal.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "formats/model_file.h"

namespace rapide {

// The activation side of a product with quantized weights. kInt8: activations converted to
// int8 blocks as the header comment above describes (llama.cpp's numerics, integer dot
// products). kOff: f32 activations against weights dequantized to f32 a row at a time,
// multiplied with f32 FMA (matmul_dequant*.cpp), so the accuracy cost and the speed gain of
// quantizing activations can be measured. kBf16: F16 weights are converted to BF16 when
// prepared (round to nearest even: 3 of their 10 mantissa bits go) and multiplied as BF16
// weights are, activations rounded to bf16: vdpbf16ps takes two columns per instruction
// where the F16 kernel's FMA takes one, about twice the prefill speed on AVX512-BF16 CPUs
// (same numerics everywhere, so the AVX2 and scalar kernels give the same results, without
// the gain). Other types treat kBf16 as kInt8; F32 and BF16 weights ignore the setting.
enum class ActQuant { kInt8, kOff, kBf16 };

// "int8", "off", "bf16" (the CLI's --act-quant values); throws Error(kInvalidArgument).
ActQuant act_quant_from_name(std::string_view name);

// A 2-D weight matrix prepared for fast products: rows() output features, each a row of
// cols() input features. prepare() may repack the data into a kernel-friendly layout
// (owned by this object); otherwise it reads the TensorView's memory in place, which must
// then outlive it.
class WeightMatrix {
 public:
  WeightMatrix();
  ~WeightMatrix();
  WeightMatrix(WeightMatrix&&) noexcept;
  WeightMatrix& operator=(WeightMatrix&&) noexcept;

  // Throws Error(kUnsupported) for an unsupported type, kInvalidArgument for a tensor that
  // is not 2-D or whose row length is not a multiple of the type's block size.
  static WeightMatrix prepare(const TensorView& view, ActQuant act = ActQuant::kInt8);
  // Only rows [row_begin, row_end): a shard for tensor parallelism.
  static WeightMatrix prepare_rows(const TensorView& view, int64_t row_begin, int64_t row_end,
                                   ActQuant act = ActQuant::kInt8);

  int64_t rows() const;
  int64_t cols() const;
  TensorType type() const;
  bool empty() const { return impl_ == nullptr; }

  // What the caller promises about x. kF16Exact: every value of x is an f16 value (its
  // producer rounded its rows with round_to_f16 while they were in its cache), so a product
  // whose numerics round the activations to f16 (rounds_input_to_f16()) reads x as it is
  // instead of writing a rounded copy first: the same bits, one pass over the activations
  // fewer. Products that do not round ignore it; a producer rounds only for products that
  // all do (all_round_input_to_f16), since the others' results would change.
  enum class Input { kF32, kF16Exact };
  // Up to this many rows (decode, a speculative verification, a few sequences) a product
  // streams its weights from DRAM and each thread converts the activations itself
  // (multiply_same_shape says why); above it, a batch's products are compute-bound.
  static constexpr int64_t kStreamingRows = 8;
  // F16 weights, unless prepared as BF16 (ActQuant::kBf16): llama.cpp's numerics.
  bool rounds_input_to_f16() const;
  // Whether every matrix of `ws` does (false for an empty list or an unprepared matrix).
  static bool all_round_input_to_f16(std::span<const WeightMatrix* const> ws);

  // y[t * rows() + r] = sum_c W[r][c] * x[t * cols() + c]  for t in [0, n).
  // Parallelised over rows (and tokens) with `pool`. No allocation once warmed up.
  void multiply(const float* x, int64_t n, float* y, ThreadPool& pool,
                Input input = Input::kF32) const;
  // The same with the kernels of one ISA level, which must not exceed what this CPU runs
  // (cpu_features().best_level()): tests and benchmarks compare the variants in-process.
  void multiply_with(IsaLevel level, const float* x, int64_t n, float* y, ThreadPool& pool,
                     Input input = Input::kF32) const;
  // Several matrices of one width and type (or k-quant panels of any of Q4_K/Q5_K/Q6_K)
  // applied to the same x (Q/K/V, gate/up): the activations are converted once and all
  // products run in one parallel dispatch, so a forward pass pays one conversion and one
  // pool round trip instead of one per matrix.
  // Each ys[i] gets what ws[i]->multiply(x, n, ys[i]) writes, bit for bit.
  static void multiply_group(std::span<const WeightMatrix* const> ws, const float* x, int64_t n,
                             std::span<float* const> ys, ThreadPool& pool,
                             Input input = Input::kF32);
  // Names the product that follows the next multiply / multiply_group on `pool` (with the
  // same n): while its threads wait between the two (for each other, for the caller's
  // per-token work), each prefetches the start of its part of `next`, when that product
  // streams its weights from DRAM (a few rows). A hint: results are the same without it.
  static void stream_next(std::span<const WeightMatrix* const> next, int64_t n, ThreadPool& pool);
  // The same with the scalar reference kernel, single-threaded (tests, debugging).
  void multiply_reference(const float* x, int64_t n, float* y) const;
  // Row r converted to f32 (embedding lookup).
  void dequantize_row(int64_t r, float* out) const;

  struct Impl;

 private:
  // Whether multiply_group runs `ws` in one dispatch (the matrices share their kernel).
  static bool one_dispatch(std::span<const WeightMatrix* const> ws);
  // multiply_with / multiply_group: matrices of one type and width, all prepared.
  static void multiply_same_shape(IsaLevel level, std::span<const WeightMatrix* const> ws,
                                  const float* x, int64_t n, std::span<float* const> ys,
                                  ThreadPool& pool, Input input);
  std::unique_ptr<Impl> impl_;
};

// x[i] rounded to the nearest f16 value (ties to even), in place (out == x) or not: what an
// F16 product does to its activations (WeightMatrix::Input::kF16Exact). Active ISA's kernel.
void round_to_f16(const float* x, float* out, int64_t count);

// Conversions of whole rows between f32 and a storage type (quantizing writers, tests).
// n must be a multiple of the type's block size.
void quantize_row(TensorType type, const float* in, void* out, int64_t n);
void dequantize_row(TensorType type, const void* in, float* out, int64_t n);

}  // namespace rapide
