// Scalar reference kernels: the definition every SIMD variant is tested against.
//
// They read the same packed layout as the SIMD kernels and accumulate in the same order
// (each output sums its columns, or its blocks, in order, with one fused multiply-add
// per step), so the F32, F16 and quantized SIMD kernels reproduce them bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul {

namespace scalar {

void round_f16(const float* x, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void to_bf16(const float* x, uint32_t* out, int64_t cols) {
  for (int64_t c = 0; c < cols; c += 2) {
    const uint32_t lo = fp32_to_bf16(x[c]);
    const uint32_t hi = c + 1 < cols ? fp32_to_bf16(x[c + 1]) : 0;
    out[c / 2] = lo | (hi << 16);
  }
}

// llama.cpp's x86 quantize_row_q8_0 (the one its matmuls use for activations): scale by
// 127 / amax and round half to even; the stored scale is the f16 of amax / 127.
void quantize_q8(const float* x, int64_t cols, int bias_offset, int8_t* q, float* d,
                 int32_t* bias) {
  for (int64_t b = 0; b < cols / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    d[b] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      const int v = static_cast<int>(std::nearbyintf(xb[j] * id));
      q[b * kQuantBlock + j] = static_cast<int8_t>(v);
      sum += v;
    }
    bias[b] = -bias_offset * sum;
  }
}

namespace {

void store(const PackedWeights& w, int64_t row, int64_t t, float value, float* y) {
  if (row < w.rows) y[t * w.rows + row] = value;
}

template <typename Weight>
void float_kernel(const PackedWeights& w, const float* x, int64_t stride, int64_t p0, int64_t p1,
                  int64_t t0, int64_t t1, float* y, Weight weight) {
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.panel(p);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * stride;
      for (int r = 0; r < kPanel; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < w.cols; ++c) acc = std::fmaf(weight(panel, c, r), xt[c], acc);
        store(w, p * kPanel + r, t, acc, y);
      }
    }
  }
}

template <typename Value>
void quant_kernel(const PackedWeights& w, const Activations& a, int64_t block_bytes, int64_t p0,
                  int64_t p1, int64_t t0, int64_t t1, float* y, Value value) {
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.panel(p);
    for (int64_t t = t0; t < t1; ++t) {
      const int8_t* qt = a.q + t * a.stride;
      const float* dt = a.d + t * a.blocks;
      for (int r = 0; r < kPanel; ++r) {
        float acc = 0.0f;
        for (int64_t b = 0; b < w.blocks(); ++b) {
          const uint8_t* pb = panel + b * block_bytes;
          int32_t sum = 0;
          for (int c = 0; c < kQuantBlock; ++c) sum += value(pb, r, c) * qt[b * kQuantBlock + c];
          const float scale = fp16_to_fp32(q_scale(pb, r)) * dt[b];
          acc = std::fmaf(static_cast<float>(sum), scale, acc);
        }
        store(w, p * kPanel + r, t, acc, y);
      }
    }
  }
}

}  // namespace

void f32(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  float_kernel(w, a.f32, a.stride, p0, p1, t0, t1, y, [](const uint8_t* panel, int64_t c, int r) {
    float v;
    std::memcpy(&v, panel + (c * kPanel + r) * 4, 4);
    return v;
  });
}

void f16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  float_kernel(w, a.f32, a.stride, p0, p1, t0, t1, y, [](const uint8_t* panel, int64_t c, int r) {
    uint16_t h;
    std::memcpy(&h, panel + (c * kPanel + r) * 2, 2);
    return fp16_to_fp32(h);
  });
}

// Sums each column pair as vdpbf16ps does: the odd product first, then the even one.
void bf16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  const int64_t pairs = (w.cols + 1) / 2;
  for (int64_t p = p0; p < p1; ++p) {
    const auto* panel = reinterpret_cast<const uint16_t*>(w.panel(p));
    for (int64_t t = t0; t < t1; ++t) {
      const uint32_t* xt = a.bf16 + t * a.stride;
      for (int r = 0; r < kPanel; ++r) {
        float acc = 0.0f;
        for (int64_t k = 0; k < pairs; ++k) {
          const uint16_t* wk = panel + (k * kPanel + r) * 2;
          acc += bf16_to_fp32(wk[1]) * bf16_to_fp32(static_cast<uint16_t>(xt[k] >> 16));
          acc += bf16_to_fp32(wk[0]) * bf16_to_fp32(static_cast<uint16_t>(xt[k] & 0xffff));
        }
        store(w, p * kPanel + r, t, acc, y);
      }
    }
  }
}

void q8_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  quant_kernel(w, a, kQ8PanelBlockBytes, p0, p1, t0, t1, y, q8_value);
}

void q4_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  quant_kernel(w, a, kQ4PanelBlockBytes, p0, p1, t0, t1, y,
               [](const uint8_t* pb, int r, int c) { return q4_nibble(pb, r, c) - 8; });
}

}  // namespace scalar

void row_panels(const RowKernels& k, const PackedWeights& w, const Activations& a, int64_t p0,
                int64_t p1, int64_t t0, int64_t t1, float* y) {
  const int64_t row_bytes = w.panel_bytes / kPanel;
  const int64_t blocks = w.cols / tensor_type_block_size(w.type);
  auto act = [&](int64_t t) {
    return ActRow{a.q + t * a.stride, a.d + t * a.blocks, a.s ? a.s + t * a.blocks : nullptr,
                  a.bsums ? a.bsums + t * a.blocks * 16 : nullptr};
  };
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* panel = w.panel(p);
    float* yp = y + p * kPanel;
    const int rows = static_cast<int>(std::min<int64_t>(kPanel, w.rows - p * kPanel));
    int64_t t = t0;
    if (k.tokens != nullptr) {
      for (; t + kRowTokens <= t1; t += kRowTokens) {
        ActRow xs[kRowTokens];
        for (int i = 0; i < kRowTokens; ++i) xs[i] = act(t + i);
        for (int r = 0; r < rows; ++r) {
          float out[kRowTokens];
          k.tokens(panel + r * row_bytes, blocks, xs, out);
          for (int i = 0; i < kRowTokens; ++i) yp[(t + i) * w.rows + r] = out[i];
        }
      }
    }
    for (; t < t1; ++t) {
      const ActRow x = act(t);
      int r = 0;
      if (k.rows != nullptr) {
        for (; r + kRowTile <= rows; r += kRowTile) {
          k.rows(panel + r * row_bytes, row_bytes, blocks, x, yp + t * w.rows + r);
        }
      }
      for (; r < rows; ++r) yp[t * w.rows + r] = k.dot(panel + r * row_bytes, blocks, x);
    }
  }
}

const KernelSet& reference_kernels() {
  static const KernelSet set{scalar::round_f16,    scalar::to_bf16,
                             scalar::quantize_q8,  quantize_q8_k,
                             scalar::f32,          scalar::f16,
                             scalar::bf16,         scalar::q8_0,
                             scalar::q4_0,         0,
                             scalar::row_dot,      scalar::row_dot_tokens,
                             scalar::row_dot_rows, scalar::dot_f32,
                             scalar::dequant_row,  scalar::kpanel};
  return set;
}

}  // namespace rapide::matmul
