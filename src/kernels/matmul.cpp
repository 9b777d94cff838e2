// WeightMatrix: packing at prepare() time, activation conversion, and the parallel split of
// a product across the thread pool. The arithmetic lives in the per-ISA kernel files.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/aligned_buffer.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/fp16.h"
#include "kernels/matmul_internal.h"

namespace rapide {

using matmul::Activations;
using matmul::KernelSet;
using matmul::kPanel;
using matmul::PackedWeights;

struct WeightMatrix::Impl {
  PackedWeights packed;
};

namespace matmul {

// Tables of function pointers only: built at the baseline ISA, and a SIMD function is
// called only once active_isa_level() has confirmed the CPU runs it.
const KernelSet& avx2_kernels() {
  static const KernelSet set{avx2::round_f16,
                             avx2::to_bf16,
                             avx2::quantize_q8,
                             avx2::quantize_q8_k,
                             avx2::f32,
                             avx2::f16,
                             avx2::bf16,
                             avx2::q8_0,
                             avx2::q4_0,
                             0,  // sign trick: no offset to correct
                             avx2::row_dot,
                             avx2::row_dot_tokens,
                             avx2::row_dot_rows,
                             avx2::dot_f32,
                             avx2::dequant_row,
                             avx2::kpanel};
  return set;
}

const KernelSet& avx512_kernels() {
  static const KernelSet set{avx512::round_f16,
                             avx512::to_bf16,
                             avx512::quantize_q8,
                             avx512::quantize_q8_k,
                             avx512::f32,
                             avx512::f16,
                             avx512::bf16,
                             avx512::q8_0,
                             avx512::q4_0,
                             128,  // weights + 128
                             avx512::row_dot,
                             avx512::row_dot_tokens,
                             avx512::row_dot_rows,
                             avx512::dot_f32,
                             avx512::dequant_row,
                             avx512::kpanel};
  return set;
}

}  // namespace matmul

namespace {

const KernelSet& kernels_for(IsaLevel level) {
  if (level > cpu_features().best_level()) {
    fail(ErrorCode::kUnsupported, "this CPU cannot run the {} kernels", isa_level_name(level));
  }
  switch (level) {
    case IsaLevel::kAvx512:
      return matmul::avx512_kernels();
    case IsaLevel::kAvx2:
      return matmul::avx2_kernels();
    case IsaLevel::kScalar:
      break;
  }
  return matmul::reference_kernels();
}

// The BF16 panel layout's 16 bits of column c of row s (GGUF layout, `source` type): BF16
// as stored, F16 converted (ActQuant::kBf16).
uint16_t bf16_bits(TensorType source, const uint8_t* s, int64_t c) {
  uint16_t h;
  std::memcpy(&h, s + c * 2, 2);
  return source == TensorType::kF16 ? fp32_to_bf16(fp16_to_fp32(h)) : h;
}

// Copies rows [row_begin, row_end) of a GGUF-layout tensor into the panel layout
// described in matmul_internal.h (out.type may be BF16 for an F16 tensor: ActQuant::kBf16).
void pack(const TensorView& view, int64_t row_begin, int64_t row_end, PackedWeights& out) {
  const int64_t cols = out.cols;
  const int64_t row_bytes = tensor_row_bytes(view.type, cols);
  const uint8_t* src = view.data + row_begin * row_bytes;
  const int64_t rows = row_end - row_begin;
  if (out.raw_rows()) {
    // Whole rows as in the file; the padding rows of the last panel stay zero.
    for (int64_t p = 0; p < out.panels; ++p) {
      uint8_t* panel = out.data.data() + p * out.panel_bytes;
      const int64_t n = std::min<int64_t>(kPanel, rows - p * kPanel);
      std::memset(panel, 0, static_cast<size_t>(out.panel_bytes));
      std::memcpy(panel, src + p * kPanel * row_bytes, static_cast<size_t>(n * row_bytes));
    }
    return;
  }
  if (out.kpanel()) {
    for (int64_t p = 0; p < out.panels; ++p) {
      const int n = static_cast<int>(std::min<int64_t>(kPanel, rows - p * kPanel));
      const int64_t block_bytes = matmul::kpanel_layout(out.type).block();
      for (int64_t b = 0; b < cols / kSuperBlock; ++b) {
        matmul::kpanel_pack(out.type, src + p * kPanel * row_bytes, row_bytes, n, b,
                            out.data.data() + p * out.panel_bytes + b * block_bytes);
      }
    }
    return;
  }
  for (int64_t p = 0; p < out.panels; ++p) {
    uint8_t* panel = out.data.data() + p * out.panel_bytes;
    std::memset(panel, 0, static_cast<size_t>(out.panel_bytes));
    for (int r = 0; r < kPanel; ++r) {
      const int64_t row = p * kPanel + r;
      if (row >= rows) break;
      const uint8_t* s = src + row * row_bytes;
      switch (out.type) {
        case TensorType::kF32:
          for (int64_t c = 0; c < cols; ++c) {
            std::memcpy(panel + (c * kPanel + r) * 4, s + c * 4, 4);
          }
          break;
        case TensorType::kF16:
          for (int64_t c = 0; c < cols; ++c) {
            std::memcpy(panel + (c * kPanel + r) * 2, s + c * 2, 2);
          }
          break;
        case TensorType::kBF16:
          for (int64_t c = 0; c < cols; ++c) {
            const uint16_t bits = bf16_bits(view.type, s, c);
            std::memcpy(panel + ((c / 2) * kPanel * 2 + r * 2 + c % 2) * 2, &bits, 2);
          }
          break;
        case TensorType::kQ8_0:
          for (int64_t b = 0; b < out.blocks(); ++b) {
            BlockQ8_0 block;
            std::memcpy(&block, s + b * sizeof(BlockQ8_0), sizeof(block));
            uint8_t* pb = panel + b * matmul::kQ8PanelBlockBytes;
            std::memcpy(pb + r * 2, &block.d, 2);
            for (int g = 0; g < 8; ++g) {
              uint8_t* dst = pb + 2 * kPanel + (g * kPanel + r) * 4;
              for (int j = 0; j < 4; ++j) dst[j] = static_cast<uint8_t>(block.qs[g * 4 + j]) ^ 0x80;
            }
          }
          break;
        default:  // row-wise types are copied above
          break;
        case TensorType::kQ4_0:
          for (int64_t b = 0; b < out.blocks(); ++b) {
            BlockQ4_0 block;
            std::memcpy(&block, s + b * sizeof(BlockQ4_0), sizeof(block));
            uint8_t* pb = panel + b * matmul::kQ4PanelBlockBytes;
            std::memcpy(pb + r * 2, &block.d, 2);
            // GGUF byte j already pairs col j (low) with col j + 16 (high): copy 4 at a time.
            for (int g = 0; g < 4; ++g) {
              std::memcpy(pb + 2 * kPanel + (g * kPanel + r) * 4, block.qs + g * 4, 4);
            }
          }
          break;
      }
    }
  }
}

int64_t panel_bytes(TensorType type, int64_t cols, bool float_act) {
  if (float_act) return kPanel * tensor_row_bytes(type, cols);
  if (matmul::is_kpanel_type(type)) return cols / kSuperBlock * matmul::kpanel_layout(type).block();
  switch (type) {
    case TensorType::kF32:
      return cols * kPanel * 4;
    case TensorType::kF16:
      return cols * kPanel * 2;
    case TensorType::kBF16:
      return (cols + 1) / 2 * kPanel * 4;
    case TensorType::kQ8_0:
      return cols / kQuantBlock * matmul::kQ8PanelBlockBytes;
    case TensorType::kQ4_0:
      return cols / kQuantBlock * matmul::kQ4PanelBlockBytes;
    default:
      return kPanel * tensor_row_bytes(type, cols);
  }
}

// Grow-only buffers for converted activations, one set per calling thread, so a warmed-up
// multiply allocates nothing.
struct Scratch {
  AlignedBuffer<float> f32;
  AlignedBuffer<uint32_t> bf16;
  AlignedBuffer<int8_t> q;
  AlignedBuffer<float> d;
  AlignedBuffer<int32_t> bias;
  AlignedBuffer<float> s;
  AlignedBuffer<int16_t> bsums;

  template <typename T>
  static T* ensure(AlignedBuffer<T>& buf, int64_t count) {
    if (buf.size() < static_cast<size_t>(count)) buf.resize(static_cast<size_t>(count));
    return buf.data();
  }
};

Scratch& thread_scratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Below this many multiply-adds a dispatch to the pool costs more than it saves.
constexpr int64_t kMinParallelWork = 1 << 15;

// Up to WeightMatrix::kStreamingRows rows the weights' stream from DRAM is what costs: such a
// product goes by one contiguous range of panels per thread in pieces of streaming_piece()
// panels (multiply_same_shape says why).
constexpr int64_t kStreamingRows = WeightMatrix::kStreamingRows;
int64_t streaming_piece(int64_t total_panels, int threads) {
  return std::max<int64_t>(4, total_panels / (8 * threads));
}

// Converts n tokens of x for `type` into scratch and returns the kernels' view of them.
// f16_exact: x's values are already f16 values (WeightMatrix::Input::kF16Exact).
template <typename ForTokens>
Activations convert_activations(const KernelSet& ks, TensorType type, bool float_act,
                                const float* x, int64_t n, int64_t cols, Scratch& s,
                                ForTokens&& for_tokens, bool f16_exact = false) {
  Activations a;
  if (float_act) {  // ActQuant::kOff: the kernel reads x as it is
    a.f32 = x;
    a.stride = cols;
    return a;
  }
  switch (type) {
    case TensorType::kF32:
      a.f32 = x;
      a.stride = cols;
      break;
    case TensorType::kF16: {
      if (f16_exact) {  // rounding is the identity on them
        a.f32 = x;
        a.stride = cols;
        break;
      }
      float* out = Scratch::ensure(s.f32, n * cols);
      for_tokens([&](int64_t t0, int64_t t1) {
        ks.round_f16(x + t0 * cols, out + t0 * cols, (t1 - t0) * cols);
      });
      a.f32 = out;
      a.stride = cols;
      break;
    }
    case TensorType::kBF16: {
      const int64_t pairs = (cols + 1) / 2;
      uint32_t* out = Scratch::ensure(s.bf16, n * pairs);
      for_tokens([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) ks.to_bf16(x + t * cols, out + t * pairs, cols);
      });
      a.bf16 = out;
      a.stride = pairs;
      break;
    }
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: {
      const int64_t blocks = cols / kQuantBlock;
      int8_t* q = Scratch::ensure(s.q, n * cols);
      float* d = Scratch::ensure(s.d, n * blocks);
      int32_t* bias = Scratch::ensure(s.bias, n * blocks);
      const int offset = type == TensorType::kQ4_0 ? 8 : ks.q8_bias_offset;
      for_tokens([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          ks.quantize_q8(x + t * cols, cols, offset, q + t * cols, d + t * blocks,
                         bias + t * blocks);
        }
      });
      a.q = q;
      a.d = d;
      a.bias = bias;
      a.stride = cols;
      a.blocks = blocks;
      break;
    }
    default: {  // row-wise types (kernels/rowquant.h)
      const matmul::RowAct act = matmul::row_activation(type);
      const int64_t blocks = cols / matmul::row_act_block(act);
      int8_t* q = Scratch::ensure(s.q, n * cols);
      float* d = Scratch::ensure(s.d, n * blocks);
      float* sums = act == matmul::RowAct::kQ8_1 ? Scratch::ensure(s.s, n * blocks) : nullptr;
      int16_t* bsums =
          act == matmul::RowAct::kQ8_K ? Scratch::ensure(s.bsums, n * blocks * 16) : nullptr;
      int32_t* bias = act == matmul::RowAct::kQ8_0 ? Scratch::ensure(s.bias, n * blocks) : nullptr;
      for_tokens([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const float* xt = x + t * cols;
          switch (act) {
            case matmul::RowAct::kQ8_0:
              ks.quantize_q8(xt, cols, 0, q + t * cols, d + t * blocks, bias + t * blocks);
              break;
            case matmul::RowAct::kQ8_1:
              matmul::quantize_q8_1(xt, cols, q + t * cols, d + t * blocks, sums + t * blocks);
              break;
            case matmul::RowAct::kQ8_K:
              ks.quantize_q8_k(xt, cols, q + t * cols, d + t * blocks, bsums + t * blocks * 16);
              break;
          }
        }
      });
      a.q = q;
      a.d = d;
      a.s = sums;
      a.bsums = bsums;
      a.stride = cols;
      a.blocks = blocks;
      break;
    }
  }
  return a;
}

matmul::PanelKernel panel_kernel(const KernelSet& ks, TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return ks.f32;
    case TensorType::kF16:
      return ks.f16;
    case TensorType::kBF16:
      return ks.bf16;
    case TensorType::kQ8_0:
      return ks.q8_0;
    case TensorType::kQ4_0:
      return ks.q4_0;
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
      return ks.kpanel;
    default:
      return nullptr;  // row-wise types: run_kernel() below
  }
}

}  // namespace

ActQuant act_quant_from_name(std::string_view name) {
  if (name == "int8") return ActQuant::kInt8;
  if (name == "off") return ActQuant::kOff;
  if (name == "bf16") return ActQuant::kBf16;
  fail(ErrorCode::kInvalidArgument, "activation mode '{}': expected int8, off or bf16", name);
}

WeightMatrix::WeightMatrix() = default;
WeightMatrix::~WeightMatrix() = default;
WeightMatrix::WeightMatrix(WeightMatrix&&) noexcept = default;
WeightMatrix& WeightMatrix::operator=(WeightMatrix&&) noexcept = default;

WeightMatrix WeightMatrix::prepare(const TensorView& view, ActQuant act) {
  return prepare_rows(view, 0, view.rows(), act);
}

WeightMatrix WeightMatrix::prepare_rows(const TensorView& view, int64_t row_begin, int64_t row_end,
                                        ActQuant act) {
  if (!is_supported_tensor_type(static_cast<uint32_t>(view.type))) {
    fail(ErrorCode::kUnsupported, "tensor '{}': type {} has no matmul kernel", view.name,
         static_cast<uint32_t>(view.type));
  }
  bool matrix = view.shape.size() >= 2;
  for (size_t i = 2; i < view.shape.size(); ++i) matrix = matrix && view.shape[i] == 1;
  if (!matrix) {
    fail(ErrorCode::kInvalidArgument, "tensor '{}': a weight matrix must be 2-D, got {} dims",
         view.name, view.shape.size());
  }
  const int64_t cols = view.row_length();
  if (cols <= 0 || cols % tensor_type_block_size(view.type) != 0) {
    fail(ErrorCode::kInvalidArgument,
         "tensor '{}': row length {} is not a positive multiple of the {} block size", view.name,
         cols, tensor_type_name(view.type));
  }
  if (row_begin < 0 || row_end > view.rows() || row_begin >= row_end) {
    fail(ErrorCode::kInvalidArgument, "tensor '{}': row range [{}, {}) outside [0, {})", view.name,
         row_begin, row_end, view.rows());
  }
  const int64_t row_bytes = tensor_row_bytes(view.type, cols);
  if (view.data == nullptr || static_cast<uint64_t>(row_end * row_bytes) > view.size_bytes) {
    fail(ErrorCode::kInvalidArgument, "tensor '{}': {} bytes of data, {} rows need {}", view.name,
         view.size_bytes, row_end, row_end * row_bytes);
  }
  WeightMatrix m;
  m.impl_ = std::make_unique<Impl>();
  PackedWeights& p = m.impl_->packed;
  p.type = act == ActQuant::kBf16 && view.type == TensorType::kF16 ? TensorType::kBF16 : view.type;
  p.rows = row_end - row_begin;
  p.cols = cols;
  p.panels = (p.rows + kPanel - 1) / kPanel;
  p.float_act = act == ActQuant::kOff && !is_float_type(view.type);
  p.panel_bytes = panel_bytes(p.type, cols, p.float_act);
  p.data = matmul::WeightBuffer(static_cast<size_t>(p.panels * p.panel_bytes));
  pack(view, row_begin, row_end, p);
  return m;
}

int64_t WeightMatrix::rows() const {
  return impl_ ? impl_->packed.rows : 0;
}
int64_t WeightMatrix::cols() const {
  return impl_ ? impl_->packed.cols : 0;
}
TensorType WeightMatrix::type() const {
  return impl_ ? impl_->packed.type : TensorType::kF32;
}

bool WeightMatrix::rounds_input_to_f16() const {
  return impl_ != nullptr && impl_->packed.type == TensorType::kF16 && !impl_->packed.float_act;
}

bool WeightMatrix::all_round_input_to_f16(std::span<const WeightMatrix* const> ws) {
  if (ws.empty()) return false;
  for (const WeightMatrix* w : ws) {
    if (w == nullptr || !w->rounds_input_to_f16()) return false;
  }
  return true;
}

void round_to_f16(const float* x, float* out, int64_t count) {
  static const KernelSet& ks = kernels_for(active_isa_level());
  ks.round_f16(x, out, count);
}

void WeightMatrix::multiply(const float* x, int64_t n, float* y, ThreadPool& pool,
                            Input input) const {
  static const IsaLevel level = active_isa_level();
  multiply_with(level, x, n, y, pool, input);
}

void WeightMatrix::multiply_with(IsaLevel level, const float* x, int64_t n, float* y,
                                 ThreadPool& pool, Input input) const {
  if (n <= 0 || !impl_) return;
  const WeightMatrix* self[] = {this};
  float* const out[] = {y};
  multiply_same_shape(level, self, x, n, out, pool, input);
}

void WeightMatrix::multiply_group(std::span<const WeightMatrix* const> ws, const float* x,
                                  int64_t n, std::span<float* const> ys, ThreadPool& pool,
                                  Input input) {
  if (ws.size() != ys.size()) {
    fail(ErrorCode::kInvalidArgument, "multiply_group: {} matrices but {} outputs", ws.size(),
         ys.size());
  }
  if (n <= 0 || ws.empty()) return;
  // A dispatch per matrix costs more than the work of a small one: on Zen 5, 2 threads, a
  // 128 KiB Q4_K matrix streams at ~25 GB/s where 2 MiB ones reach the read probe.
  if (!one_dispatch(ws)) {
    for (size_t i = 0; i < ws.size(); ++i) ws[i]->multiply(x, n, ys[i], pool, input);
    return;
  }
  static const IsaLevel level = active_isa_level();
  multiply_same_shape(level, ws, x, n, ys, pool, input);
}

bool WeightMatrix::one_dispatch(std::span<const WeightMatrix* const> ws) {
  // One dispatch needs one activation conversion and one kernel: the same type, or k-quant
  // panels of any of their types (one kernel, Q8_K activations), as Q4_K_M's Q4_K query and
  // key with its Q6_K value.
  const PackedWeights* f = ws[0]->impl_ ? &ws[0]->impl_->packed : nullptr;
  for (const WeightMatrix* m : ws) {
    const PackedWeights* p = m->impl_ ? &m->impl_->packed : nullptr;
    if (!p || !f || p->cols != f->cols || p->float_act != f->float_act ||
        (p->type != f->type && !(p->kpanel() && f->kpanel()))) {
      return false;
    }
  }
  return true;
}

void WeightMatrix::stream_next(std::span<const WeightMatrix* const> next, int64_t n,
                               ThreadPool& pool) {
  // About what one core streams during the gaps of a decode step (a few microseconds each),
  // well inside its L2. Measured on Zen 5 (2 threads, synth100m, batch-1 decode, the sum over
  // 64 steps of each step's fastest of 10-12 runs, with and without alternating in one
  // process): Q8_0 1.436 -> 1.412, 1.464 -> 1.430, 1.472 -> 1.416 and 1.666 -> 1.611 ms,
  // Q4_K_M 0.957 -> 0.929, Q4_0 0.808 -> 0.779; F16 (gaps smaller beside its larger
  // matrices) 3.135 against 3.155, within noise. 64 KiB, 256 KiB and 1 MiB were no better.
  constexpr int64_t kIdleBytes = 128 * 1024;
  const int threads = pool.size();
  if (threads == 1 || n > kStreamingRows || next.empty()) return;
  // A group run matrix by matrix starts with its first.
  if (!one_dispatch(next)) next = next.first(1);
  int64_t total_panels = 0, work = 0;
  for (const WeightMatrix* m : next) {
    if (!m->impl_) return;
    total_panels += m->impl_->packed.panels;
    work += n * m->impl_->packed.rows * m->impl_->packed.cols;
  }
  if (work < kMinParallelWork) return;  // it will run on the calling thread alone
  // Each thread's first panel in that call, as multiply_same_shape cuts it.
  const int64_t piece = streaming_piece(total_panels, threads);
  const int64_t pieces = (total_panels + piece - 1) / piece;
  for (int t = 0; t < threads; ++t) {
    int64_t p = ThreadPool::first_piece(pieces, t, threads) * piece;
    int64_t end = std::min(total_panels, ThreadPool::first_piece(pieces, t + 1, threads) * piece);
    for (const WeightMatrix* m : next) {
      const PackedWeights& w = m->impl_->packed;
      if (p < w.panels) {
        const int64_t bytes = (std::min(end, w.panels) - p) * w.panel_bytes;
        pool.prefetch_while_idle(t, w.panel(p), static_cast<size_t>(std::min(bytes, kIdleBytes)));
        break;
      }
      p -= w.panels;
      end -= w.panels;
    }
  }
}

void WeightMatrix::multiply_same_shape(IsaLevel level, std::span<const WeightMatrix* const> ws,
                                       const float* x, int64_t n, std::span<float* const> ys,
                                       ThreadPool& pool, Input input) {
  const KernelSet& ks = kernels_for(level);
  const PackedWeights& first = ws[0]->impl_->packed;
  int64_t total_panels = 0, work = 0;
  for (const WeightMatrix* m : ws) {
    total_panels += m->impl_->packed.panels;
    work += n * m->impl_->packed.rows * m->impl_->packed.cols;
  }
  const matmul::PanelKernel kernel = panel_kernel(ks, first.type);
  const bool row_type = !first.float_act && !first.kpanel() && matmul::is_row_type(first.type);
  const matmul::RowKernels row_kernels =
      row_type ? matmul::row_kernels(ks, first.type) : matmul::RowKernels{};
  // Panels [p0, p1) of the matrices laid end to end.
  auto run_panels = [&](const Activations& a, int64_t p0, int64_t p1, int64_t t0, int64_t t1) {
    int64_t base = 0;
    for (size_t i = 0; i < ws.size() && base < p1; ++i) {
      const PackedWeights& w = ws[i]->impl_->packed;
      const int64_t begin = std::max(p0, base) - base, end = std::min(p1, base + w.panels) - base;
      if (begin < end) {
        if (w.float_act) {
          matmul::dequant_panels(ks, w, a, begin, end, t0, t1, ys[i]);
        } else if (row_type) {
          matmul::row_panels(row_kernels, w, a, begin, end, t0, t1, ys[i]);
        } else {
          kernel(w, a, begin, end, t0, t1, ys[i]);
        }
      }
      base += w.panels;
    }
  };
  const bool f16_exact = input == Input::kF16Exact;
  auto convert_serial = [&](Scratch& scratch) {
    return convert_activations(
        ks, first.type, first.float_act, x, n, first.cols, scratch,
        [&](auto&& convert) { convert(int64_t{0}, n); }, f16_exact);
  };
  const bool parallel = pool.size() > 1 && work >= kMinParallelWork;
  if (!parallel) return run_panels(convert_serial(thread_scratch()), 0, total_panels, 0, n);
  const int threads = pool.size();
  if (n <= kStreamingRows) {
    // Decode streams the weights: one contiguous range of rows per thread, in pieces
    // (ThreadPool::parallel_ranges says why). Measured on Zen 5, synth100m, 5 pairs in time:
    // one range per thread instead of two chunks, decode x1.05 Q4_K_M, x1.14 Q8_0. The same
    // for 3-8 rows instead of 2-panel pieces after a shared conversion (decode steps of n
    // sequences, per-step minima alternated in one process): F16 n = 3 / 5 at 3.91 / 4.55 ms
    // against 5.01 / 5.55, Q4_K_M 1.46 / 1.98 against 1.58 / 2.20, Q8_0 within 3 %.
    //
    // Each thread converts the activations itself, into its own scratch, the first time it
    // joins this call. Converting once on the calling thread left the others idle meanwhile
    // and then reading the converted values line by line from its cache inside the kernel,
    // stalls a streaming loop cannot hide: on Zen 5 (2 threads) a 128 KiB Q4_K matrix took
    // 3.9 us, 0.8 us of them converting and 0.5 us the worker's lag behind the caller.
    const int64_t piece = streaming_piece(total_panels, threads);
    // Unique per call, so a thread's scratch from an earlier call is never taken for this one.
    static std::atomic<uint64_t> calls{0};
    const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
    pool.parallel_ranges(total_panels, piece, [&](int64_t p0, int64_t p1, int) {
      thread_local uint64_t converted_for = 0;
      thread_local Activations a;
      if (converted_for != call) {
        a = convert_serial(thread_scratch());
        converted_for = call;
      }
      run_panels(a, p0, p1, 0, n);
    });
    return;
  }
  // Converting activations is O(n * cols), worth spreading only for a batch of tokens.
  const bool parallel_convert = n * first.cols >= kMinParallelWork;
  const Activations a = convert_activations(
      ks, first.type, first.float_act, x, n, first.cols, thread_scratch(),
      [&](auto&& convert) {
        if (!parallel_convert) return convert(int64_t{0}, n);
        pool.parallel_for(n, 1, [&](int64_t t0, int64_t t1, int) { convert(t0, t1); });
      },
      f16_exact);
  // Rows split evenly for tall matrices; a batch of tokens against short matrices is split
  // by tokens instead so every thread still gets work. The rows go by parallel_ranges in
  // pieces of 2 panels: a thread that finishes first takes single pieces from the back of the
  // other's range, where 8 shared chunks left it waiting for up to an eighth of the matrix.
  // Measured on Zen 5 (2 threads, synth100m Q8_0, bench_speed_report: the sum over 64 decode
  // steps of 32 sequences of each step's fastest of 10-15 runs, the two ways alternating run
  // by run): 11.97 -> 11.57 and 12.69 -> 12.30 ms per step; a 128-token prefill the same
  // within 0.5 %.
  if (total_panels >= 8 * threads || n < 8 * threads) {
    pool.parallel_ranges(total_panels, 2,
                         [&](int64_t p0, int64_t p1, int) { run_panels(a, p0, p1, 0, n); });
  } else {
    pool.parallel_for(n, 4,
                      [&](int64_t t0, int64_t t1, int) { run_panels(a, 0, total_panels, t0, t1); });
  }
}

void WeightMatrix::multiply_reference(const float* x, int64_t n, float* y) const {
  if (n <= 0 || !impl_) return;
  const PackedWeights& w = impl_->packed;
  const KernelSet& ks = matmul::reference_kernels();
  const Activations a = convert_activations(ks, w.type, w.float_act, x, n, w.cols, thread_scratch(),
                                            [&](auto&& convert) { convert(int64_t{0}, n); });
  if (w.float_act) return matmul::dequant_panels(ks, w, a, 0, w.panels, 0, n, y);
  if (!w.kpanel() && matmul::is_row_type(w.type)) {
    return matmul::row_panels(matmul::row_kernels(ks, w.type), w, a, 0, w.panels, 0, n, y);
  }
  panel_kernel(ks, w.type)(w, a, 0, w.panels, 0, n, y);
}

void WeightMatrix::dequantize_row(int64_t r, float* out) const {
  if (!impl_ || r < 0 || r >= impl_->packed.rows) {
    fail(ErrorCode::kOutOfRange, "row {} outside a {}-row matrix", r, rows());
  }
  const PackedWeights& w = impl_->packed;
  const uint8_t* panel = w.panel(r / kPanel);
  const int pr = static_cast<int>(r % kPanel);
  if (w.raw_rows()) {
    const int64_t row_bytes = w.panel_bytes / kPanel;
    return rapide::dequantize_row(w.type, panel + pr * row_bytes, out, w.cols);
  }
  if (w.kpanel()) {
    const int64_t block_bytes = matmul::kpanel_layout(w.type).block();
    matmul::Unpacked256 u;
    for (int64_t b = 0; b < w.cols / kSuperBlock; ++b) {
      matmul::kpanel_unpack(w.type, panel + b * block_bytes, pr, u);
      matmul::unpacked256_to_f32(u, fp16_to_fp32(u.d), fp16_to_fp32(u.dmin), out + b * kSuperBlock);
    }
    return;
  }
  switch (w.type) {
    case TensorType::kF32:
      for (int64_t c = 0; c < w.cols; ++c) {
        std::memcpy(out + c, panel + (c * kPanel + pr) * 4, 4);
      }
      return;
    case TensorType::kF16:
    case TensorType::kBF16:
      for (int64_t c = 0; c < w.cols; ++c) {
        uint16_t h;
        const int64_t i =
            w.type == TensorType::kF16 ? c * kPanel + pr : (c / 2) * kPanel * 2 + pr * 2 + c % 2;
        std::memcpy(&h, panel + i * 2, 2);
        out[c] = w.type == TensorType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: {
      const bool q8 = w.type == TensorType::kQ8_0;
      for (int64_t b = 0; b < w.blocks(); ++b) {
        const uint8_t* pb =
            panel + b * (q8 ? matmul::kQ8PanelBlockBytes : matmul::kQ4PanelBlockBytes);
        const float d = fp16_to_fp32(matmul::q_scale(pb, pr));
        for (int c = 0; c < kQuantBlock; ++c) {
          const int v = q8 ? matmul::q8_value(pb, pr, c) : matmul::q4_nibble(pb, pr, c) - 8;
          out[b * kQuantBlock + c] = d * static_cast<float>(v);
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace rapide
