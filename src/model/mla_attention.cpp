#include "model/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "formats/tensor_type.h"
#include "kernels/ops.h"
#include "model/rope.h"

namespace rapide {
namespace {

std::string name_of(int layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

const TensorView& matrix_view(const ModelFile& f, const std::string& name, int64_t cols,
                              int64_t rows) {
  const TensorView& view = f.get(name);
  if (view.row_length() != cols || view.rows() != rows) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has the wrong shape: expected [{}, {}]", name, cols,
         rows);
  }
  return view;
}

std::vector<float> load_norm(const ModelFile& f, const std::string& name, int64_t n) {
  const TensorView& view = f.get(name);
  if (view.element_count() != n) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has {} elements, expected {}", name,
         view.element_count(), n);
  }
  std::vector<float> out(n);
  dequantize_row(view.type, view.data, out.data(), n);
  return out;
}

// W_UK[h]^T: rows [first, first + nope) of attn_kv_b (each kv_lora values), as f32 with one
// row per latent dimension and one column per nope dimension.
WeightMatrix transposed_rows(const TensorView& kv_b, int64_t first, int64_t nope, int64_t kv_lora) {
  const int64_t row_bytes = tensor_row_bytes(kv_b.type, kv_lora);
  std::vector<float> rows(static_cast<size_t>(nope * kv_lora));
  for (int64_t r = 0; r < nope; ++r) {
    dequantize_row(kv_b.type, kv_b.data + (first + r) * row_bytes, rows.data() + r * kv_lora,
                   kv_lora);
  }
  std::vector<float> t(rows.size());
  for (int64_t r = 0; r < nope; ++r) {
    for (int64_t d = 0; d < kv_lora; ++d) t[d * nope + r] = rows[r * kv_lora + d];
  }
  TensorView view;
  view.name = kv_b.name + " (W_UK^T)";
  view.type = TensorType::kF32;
  view.shape = {nope, kv_lora};
  view.data = reinterpret_cast<const uint8_t*>(t.data());
  view.size_bytes = t.size() * sizeof(float);
  return WeightMatrix::prepare(view);  // repacks: t may go
}

}  // namespace

std::vector<const WeightMatrix*> MlaWeights::matrices() const {
  std::vector<const WeightMatrix*> all;
  for (const WeightMatrix* m : {&q_a, &q_b, &q, &kv_a, &out}) {
    if (!m->empty()) all.push_back(m);
  }
  for (const WeightMatrix& m : uk_t) all.push_back(&m);
  for (const WeightMatrix& m : uv) all.push_back(&m);
  return all;
}

MlaWeights load_mla_weights(const ModelFile& f, const ModelConfig& c, int layer, ActQuant act) {
  if (c.rope_scaling == RopeScaling::kLongRope || c.rope_freq_factors) {
    fail(ErrorCode::kUnsupported,
         "model '{}': per-frequency rope factors with multi-head latent attention (deepseek2) "
         "are not supported",
         f.path);
  }
  const int64_t dim = c.dim, heads = c.n_heads, nope = c.mla_nope_dim, rope = c.mla_rope_dim;
  const int64_t kv_lora = c.kv_lora_rank, v = c.mla_v_dim, q_head = nope + rope;
  MlaWeights w;
  if (c.q_lora_rank > 0) {
    w.q_a = WeightMatrix::prepare(
        matrix_view(f, name_of(layer, "attn_q_a.weight"), dim, c.q_lora_rank), act);
    w.q_a_norm = load_norm(f, name_of(layer, "attn_q_a_norm.weight"), c.q_lora_rank);
    w.q_b = WeightMatrix::prepare(
        matrix_view(f, name_of(layer, "attn_q_b.weight"), c.q_lora_rank, heads * q_head), act);
  } else {
    w.q = WeightMatrix::prepare(
        matrix_view(f, name_of(layer, "attn_q.weight"), dim, heads * q_head), act);
  }
  w.kv_a = WeightMatrix::prepare(
      matrix_view(f, name_of(layer, "attn_kv_a_mqa.weight"), dim, kv_lora + rope), act);
  w.kv_a_norm = load_norm(f, name_of(layer, "attn_kv_a_norm.weight"), kv_lora);
  // attn_kv_b: per head, nope rows of W_UK then v rows of W_UV, each kv_lora wide.
  const TensorView& kv_b =
      matrix_view(f, name_of(layer, "attn_kv_b.weight"), kv_lora, heads * (nope + v));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t first = h * (nope + v);
    w.uk_t.push_back(transposed_rows(kv_b, first, nope, kv_lora));
    w.uv.push_back(WeightMatrix::prepare_rows(kv_b, first + nope, first + nope + v, act));
  }
  w.out = WeightMatrix::prepare(
      matrix_view(f, name_of(layer, "attn_output.weight"), heads * v, dim), act);
  return w;
}

// Rotation angles for the rope part (n_rot = mla_rope_dim), as llama.cpp's build_deepseek2
// asks ggml for them (model/rope.h computes ggml's angles): its frequency scaling (linear or
// YaRN) with the magnitude attn_factor_scaled = 1 / (1 + 0.1 ln(1 / freq_scale)), which
// cancels YaRN's own magnitude correction. Returns the score scale
// mscale^2 / sqrt(mla_nope_dim + mla_rope_dim), mscale = attn_factor (1 + yarn_log_multiplier
// ln(1 / freq_scale)): 1 / sqrt(key_length) without scaling.
float MlaAttention::prepare_rope(const ModelConfig& c, const Batch& batch) {
  RopeParams p = rope_params(c, /*local=*/false, /*factors=*/nullptr);
  p.rot_dims = c.mla_rope_dim;
  const float log_inverse = std::log(1.0f / p.freq_scale);
  p.attn_factor = 1.0f / (1.0f + 0.1f * log_inverse);
  const int half = c.mla_rope_dim / 2;
  rope_cos_.resize(static_cast<size_t>(batch.size()) * half);
  rope_sin_.resize(static_cast<size_t>(batch.size()) * half);
  for (int i = 0; i < batch.size(); ++i) {
    rope_angles(p, batch.positions[i], rope_cos_.data() + static_cast<size_t>(i) * half,
                rope_sin_.data() + static_cast<size_t>(i) * half);
  }
  const float mscale = c.yarn_attn_factor * (1.0f + c.yarn_log_multiplier * log_inverse);
  return 1.0f * mscale * mscale / std::sqrt(static_cast<float>(c.mla_nope_dim + c.mla_rope_dim));
}

void MlaAttention::forward(const MlaWeights& w, const ModelConfig& c, int kv_layer,
                           const Batch& batch, const float* xn, KvStore& kv, Attention& attention,
                           float* out, ThreadPool& pool) {
  const int n = batch.size();
  const size_t heads = static_cast<size_t>(c.n_heads);
  const size_t nope = static_cast<size_t>(c.mla_nope_dim),
               rope = static_cast<size_t>(c.mla_rope_dim);
  const size_t kv_lora = static_cast<size_t>(c.kv_lora_rank), v = static_cast<size_t>(c.mla_v_dim);
  const size_t q_head = nope + rope;  // one head of q: [q_nope ; q_pe]
  const size_t row = kv_lora + rope;  // one latent row, and one head of the attention query
  const size_t rows = static_cast<size_t>(n);
  q_.resize(rows * heads * q_head);
  latent_.resize(rows * row);
  nope_.resize(rows * nope);
  absorbed_.resize(rows * kv_lora);
  query_.resize(rows * heads * row);
  context_.resize(rows * heads * row);
  head_in_.resize(rows * kv_lora);
  head_out_.resize(rows * v);
  heads_v_.resize(rows * heads * v);
  const float score_scale = prepare_rope(c, batch);

  // q: through the q LoRA pair (or attn_q in the lite layout).
  if (!w.q_a.empty()) {
    const size_t q_lora = static_cast<size_t>(c.q_lora_rank);
    q_lora_.resize(rows * q_lora);
    w.q_a.multiply(xn, n, q_lora_.data(), pool);
    for (size_t i = 0; i < rows; ++i) {
      float* r = q_lora_.data() + i * q_lora;
      rms_norm(r, w.q_a_norm.data(), static_cast<int64_t>(q_lora), c.rms_eps, r);
    }
    w.q_b.multiply(q_lora_.data(), n, q_.data(), pool);
  } else {
    w.q.multiply(xn, n, q_.data(), pool);
  }

  // The latent rows: [RMSNorm(kv_c) ; rope(k_pe)], written to the cache as K and as V.
  w.kv_a.multiply(xn, n, latent_.data(), pool);
  for (size_t i = 0; i < rows; ++i) {
    float* r = latent_.data() + i * row;
    rms_norm(r, w.kv_a_norm.data(), static_cast<int64_t>(kv_lora), c.rms_eps, r);
    const float* cos_row = rope_cos_.data() + i * (rope / 2);
    const float* sin_row = rope_sin_.data() + i * (rope / 2);
    rope_rotate(r + kv_lora, 1, static_cast<int>(rope), cos_row, sin_row, /*neox=*/false);
  }
  Attention::write_kv(kv, kv_layer, batch, latent_.data(), latent_.data());

  // Each head's query: [W_UK[h]^T q_nope[h] ; rope(q_pe[h])].
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < rows; ++i) {
      const float* src = q_.data() + (i * heads + h) * q_head;
      std::copy(src, src + nope, nope_.data() + i * nope);
    }
    w.uk_t[h].multiply(nope_.data(), n, absorbed_.data(), pool);
    for (size_t i = 0; i < rows; ++i) {
      float* dst = query_.data() + (i * heads + h) * row;
      const float* a = absorbed_.data() + i * kv_lora;
      std::copy(a, a + kv_lora, dst);
      const float* pe = q_.data() + (i * heads + h) * q_head + nope;
      std::copy(pe, pe + rope, dst + kv_lora);
      rope_rotate(dst + kv_lora, 1, static_cast<int>(rope), rope_cos_.data() + i * (rope / 2),
                  rope_sin_.data() + i * (rope / 2), /*neox=*/false);
    }
  }

  // n_heads queries over the one latent KV head; the scale is that of the expanded heads.
  AttentionScores shape;
  shape.scale = score_scale;
  attention.attend_planned(kv, kv_layer, batch, query_.data(), c.n_heads, context_.data(), pool,
                           shape);

  // Each head's weighted sum of latent rows: its kv_c part through W_UV[h].
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < rows; ++i) {
      const float* src = context_.data() + (i * heads + h) * row;
      std::copy(src, src + kv_lora, head_in_.data() + i * kv_lora);
    }
    w.uv[h].multiply(head_in_.data(), n, head_out_.data(), pool);
    for (size_t i = 0; i < rows; ++i) {
      const float* src = head_out_.data() + i * v;
      std::copy(src, src + v, heads_v_.data() + (i * heads + h) * v);
    }
  }
  w.out.multiply(heads_v_.data(), n, out, pool);
}

}  // namespace rapide
