#include "train/train_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "kernels/matmul.h"
#include "train/gemm.h"
#include "train/train_ops.h"

namespace rapide::train {

void TrainShape::check() const {
  if (dim <= 0 || layers <= 0 || heads <= 0 || kv_heads <= 0 || head_dim <= 0 || ffn <= 0 ||
      vocab <= 0 || ctx <= 0 || heads % kv_heads != 0 || head_dim % 2 != 0) {
    fail(ErrorCode::kInvalidArgument,
         "inconsistent model shape (dim {}, layers {}, heads {}/{} kv, head dim {}, ffn {}, "
         "vocab {}, ctx {}): all must be positive, kv_heads must divide heads and the head "
         "size must be even",
         dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx);
  }
}

TrainShape shape_of(const ModelConfig& c) {
  if (c.qkv_bias || c.fused_qkv || c.fused_gate_up || c.post_norms || c.n_experts > 0 ||
      c.activation != FfnActivation::kSilu || c.attn_softcap != 0.0f || c.final_softcap != 0.0f ||
      c.embedding_scale != 0.0f || c.query_scale != 0.0f || c.sliding_window > 0 ||
      c.rope_style != RopeStyle::kNormal) {
    fail(ErrorCode::kUnsupported,
         "model '{}' ({}): training handles the plain Llama block only (no biases, fused "
         "tensors, post-norms, soft-caps, sliding windows, experts or NeoX rope)",
         c.name, c.architecture);
  }
  TrainShape s;
  s.dim = c.dim;
  s.layers = c.n_layers;
  s.heads = c.n_heads;
  s.kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.ffn = c.ffn_dim;
  s.vocab = c.vocab_size;
  s.ctx = c.max_context;
  s.rms_eps = c.rms_eps;
  s.rope_theta = c.rope_theta;
  s.rope_scale = c.rope_scale;
  s.neox = false;
  return s;
}

void TrainModel::add(const std::string& name, std::vector<int64_t> shape, bool matrix) {
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  tensors_.push_back({name, std::move(shape), static_cast<int64_t>(params_.size()), size, matrix});
  params_.resize(params_.size() + static_cast<size_t>(size));
}

TrainModel::TrainModel(const TrainShape& s) : shape_(s) {
  s.check();
  const int64_t q = s.q_dim(), kv = s.kv_dim();
  add("token_embd.weight", {s.dim, s.vocab}, true);
  embd_ = tensors_.back().offset;
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LayerOffsets o{};
    add(b + "attn_norm.weight", {s.dim}, false);
    o.attn_norm = tensors_.back().offset;
    add(b + "attn_q.weight", {s.dim, q}, true);
    o.wq = tensors_.back().offset;
    add(b + "attn_k.weight", {s.dim, kv}, true);
    o.wk = tensors_.back().offset;
    add(b + "attn_v.weight", {s.dim, kv}, true);
    o.wv = tensors_.back().offset;
    add(b + "attn_output.weight", {q, s.dim}, true);
    o.wo = tensors_.back().offset;
    add(b + "ffn_norm.weight", {s.dim}, false);
    o.ffn_norm = tensors_.back().offset;
    add(b + "ffn_gate.weight", {s.dim, s.ffn}, true);
    o.gate = tensors_.back().offset;
    add(b + "ffn_up.weight", {s.dim, s.ffn}, true);
    o.up = tensors_.back().offset;
    add(b + "ffn_down.weight", {s.ffn, s.dim}, true);
    o.down = tensors_.back().offset;
    layer_.push_back(o);
  }
  add("output_norm.weight", {s.dim}, false);
  out_norm_ = tensors_.back().offset;
  if (s.tied) {
    output_ = embd_;
  } else {
    add("output.weight", {s.dim, s.vocab}, true);
    output_ = tensors_.back().offset;
  }
  grads_.assign(params_.size(), 0.0f);
}

TrainModel TrainModel::random(const TrainShape& shape, uint64_t seed) {
  TrainModel m(shape);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(shape.layers));
  for (const ParamTensor& t : m.tensors_) {
    float* w = m.params_.data() + t.offset;
    const bool projection =
        t.name.ends_with("attn_output.weight") || t.name.ends_with("ffn_down.weight");
    for (int64_t i = 0; i < t.size; ++i) {
      w[i] = !t.matrix ? 1.0f : normal(rng) * (projection ? residual_scale : 1.0f);
    }
  }
  return m;
}

TrainModel TrainModel::from_file(const ModelFile& file) {
  TrainShape shape = shape_of(file.config);
  shape.tied = file.config.tied_embeddings || file.find("output.weight") == nullptr;
  TrainModel m(shape);
  for (const ParamTensor& t : m.tensors_) {
    const TensorView& view = file.get(t.name);
    if (view.element_count() != t.size || view.row_length() != t.shape[0]) {
      fail(ErrorCode::kCorrupt, "tensor '{}' of '{}' has {} elements in rows of {}, expected {}",
           t.name, file.path, view.element_count(), view.row_length(), t.size);
    }
    const int64_t rows = t.size / t.shape[0];
    const size_t row_bytes = view.size_bytes / static_cast<size_t>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(view.type, view.data + r * row_bytes,
                     m.params_.data() + t.offset + r * t.shape[0], t.shape[0]);
    }
  }
  return m;
}

const ParamTensor& TrainModel::tensor(const std::string& name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  fail(ErrorCode::kNotFound, "the training model has no tensor '{}'", name);
}

const float* TrainModel::residual(int layer) const {
  return layer == shape_.layers ? x_final_.data() : acts_[layer].x_in.data();
}

std::span<const float> TrainModel::forward(const int32_t* tokens, int batch, int seq) {
  const TrainShape& s = shape_;
  if (seq <= 0 || seq > s.ctx || batch <= 0) {
    fail(ErrorCode::kInvalidArgument, "training sequences of {} tokens: the model's context is {}",
         seq, s.ctx);
  }
  batch_ = batch;
  seq_ = seq;
  const int64_t n = static_cast<int64_t>(batch) * seq, dim = s.dim;
  const int64_t q_dim = s.q_dim(), kv_dim = s.kv_dim();
  tokens_.assign(tokens, tokens + n);
  acts_.resize(s.layers);
  const RopeTable rope(seq, s.head_dim, s.rope_theta, s.rope_scale, s.neox);
  const AttentionShape att{batch,      seq,
                           s.heads,    s.kv_heads,
                           s.head_dim, 1.0f / std::sqrt(static_cast<float>(s.head_dim))};

  std::vector<float> x(static_cast<size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= s.vocab) {
      fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary (0..{})", tokens[i],
           s.vocab - 1);
    }
    std::copy_n(p(embd_) + static_cast<int64_t>(tokens[i]) * dim, dim, x.data() + i * dim);
  }
  for (int l = 0; l < s.layers; ++l) {
    const LayerOffsets& o = layer_[l];
    LayerActs& a = acts_[l];
    a.x_in = x;
    a.xn1.resize(x.size());
    a.r1.resize(static_cast<size_t>(n));
    rms_norm_forward(x.data(), p(o.attn_norm), n, dim, s.rms_eps, a.xn1.data(), a.r1.data());
    a.q.resize(static_cast<size_t>(n * q_dim));
    a.k.resize(static_cast<size_t>(n * kv_dim));
    a.v.resize(static_cast<size_t>(n * kv_dim));
    linear_forward(a.xn1.data(), p(o.wq), n, dim, q_dim, a.q.data());
    linear_forward(a.xn1.data(), p(o.wk), n, dim, kv_dim, a.k.data());
    linear_forward(a.xn1.data(), p(o.wv), n, dim, kv_dim, a.v.data());
    rope_apply(a.q.data(), n, s.heads, s.head_dim, rope, false);
    rope_apply(a.k.data(), n, s.kv_heads, s.head_dim, rope, false);
    a.probs.resize(static_cast<size_t>(batch) * s.heads * seq * seq);
    a.att.resize(a.q.size());
    attention_forward(att, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), a.att.data());
    linear_forward(a.att.data(), p(o.wo), n, q_dim, dim, x.data(), /*accumulate=*/true);
    a.x_mid = x;
    a.xn2.resize(x.size());
    a.r2.resize(static_cast<size_t>(n));
    rms_norm_forward(x.data(), p(o.ffn_norm), n, dim, s.rms_eps, a.xn2.data(), a.r2.data());
    a.g.resize(static_cast<size_t>(n * s.ffn));
    a.u.resize(a.g.size());
    a.h.resize(a.g.size());
    linear_forward(a.xn2.data(), p(o.gate), n, dim, s.ffn, a.g.data());
    linear_forward(a.xn2.data(), p(o.up), n, dim, s.ffn, a.u.data());
    swiglu_forward(a.g.data(), a.u.data(), n * s.ffn, a.h.data());
    linear_forward(a.h.data(), p(o.down), n, s.ffn, dim, x.data(), /*accumulate=*/true);
  }
  x_final_ = x;
  xn_final_.resize(x.size());
  r_final_.resize(static_cast<size_t>(n));
  rms_norm_forward(x.data(), p(out_norm_), n, dim, s.rms_eps, xn_final_.data(), r_final_.data());
  logits_.resize(static_cast<size_t>(n) * s.vocab);
  linear_forward(xn_final_.data(), p(output_), n, dim, s.vocab, logits_.data());
  return {logits_.data(), logits_.size()};
}

void TrainModel::backward(const float* dlogits) {
  const TrainShape& s = shape_;
  const int64_t n = static_cast<int64_t>(batch_) * seq_, dim = s.dim;
  const int64_t q_dim = s.q_dim(), kv_dim = s.kv_dim();
  const RopeTable rope(seq_, s.head_dim, s.rope_theta, s.rope_scale, s.neox);
  const AttentionShape att{batch_,     seq_,
                           s.heads,    s.kv_heads,
                           s.head_dim, 1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  dx_.resize(static_cast<size_t>(n * dim));
  dxn_.resize(dx_.size());
  datt_.resize(static_cast<size_t>(n * q_dim));
  dq_.resize(datt_.size());
  dk_.resize(static_cast<size_t>(n * kv_dim));
  dv_.resize(dk_.size());
  dh_.resize(static_cast<size_t>(n * s.ffn));
  dg_.resize(dh_.size());
  du_.resize(dh_.size());

  linear_backward_input(dlogits, p(output_), n, dim, s.vocab, dxn_.data(), false);
  linear_backward_weight(dlogits, xn_final_.data(), n, dim, s.vocab, g(output_));
  rms_norm_backward(x_final_.data(), p(out_norm_), r_final_.data(), dxn_.data(), n, dim, dx_.data(),
                    g(out_norm_), false);
  for (int l = s.layers - 1; l >= 0; --l) {
    const LayerOffsets& o = layer_[l];
    const LayerActs& a = acts_[l];
    // FFN branch: x_out = x_mid + down(swiglu(gate(xn2), up(xn2))).
    linear_backward_input(dx_.data(), p(o.down), n, s.ffn, dim, dh_.data(), false);
    linear_backward_weight(dx_.data(), a.h.data(), n, s.ffn, dim, g(o.down));
    swiglu_backward(a.g.data(), a.u.data(), dh_.data(), n * s.ffn, dg_.data(), du_.data());
    linear_backward_input(dg_.data(), p(o.gate), n, dim, s.ffn, dxn_.data(), false);
    linear_backward_input(du_.data(), p(o.up), n, dim, s.ffn, dxn_.data(), true);
    linear_backward_weight(dg_.data(), a.xn2.data(), n, dim, s.ffn, g(o.gate));
    linear_backward_weight(du_.data(), a.xn2.data(), n, dim, s.ffn, g(o.up));
    rms_norm_backward(a.x_mid.data(), p(o.ffn_norm), a.r2.data(), dxn_.data(), n, dim, dx_.data(),
                      g(o.ffn_norm), true);
    // Attention branch: x_mid = x_in + wo(attention(rope(q), rope(k), v)).
    linear_backward_input(dx_.data(), p(o.wo), n, q_dim, dim, datt_.data(), false);
    linear_backward_weight(dx_.data(), a.att.data(), n, q_dim, dim, g(o.wo));
    attention_backward(att, a.q.data(), a.k.data(), a.v.data(), a.probs.data(), datt_.data(),
                       dq_.data(), dk_.data(), dv_.data());
    rope_apply(dq_.data(), n, s.heads, s.head_dim, rope, true);
    rope_apply(dk_.data(), n, s.kv_heads, s.head_dim, rope, true);
    linear_backward_input(dq_.data(), p(o.wq), n, dim, q_dim, dxn_.data(), false);
    linear_backward_input(dk_.data(), p(o.wk), n, dim, kv_dim, dxn_.data(), true);
    linear_backward_input(dv_.data(), p(o.wv), n, dim, kv_dim, dxn_.data(), true);
    linear_backward_weight(dq_.data(), a.xn1.data(), n, dim, q_dim, g(o.wq));
    linear_backward_weight(dk_.data(), a.xn1.data(), n, dim, kv_dim, g(o.wk));
    linear_backward_weight(dv_.data(), a.xn1.data(), n, dim, kv_dim, g(o.wv));
    rms_norm_backward(a.x_in.data(), p(o.attn_norm), a.r1.data(), dxn_.data(), n, dim, dx_.data(),
                      g(o.attn_norm), true);
  }
  for (int64_t i = 0; i < n; ++i) {
    float* row = g(embd_) + static_cast<int64_t>(tokens_[i]) * dim;
    const float* d = dx_.data() + i * dim;
    for (int64_t c = 0; c < dim; ++c) row[c] += d[c];
  }
}

}  // namespace rapide::train
