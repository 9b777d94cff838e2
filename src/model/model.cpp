#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/ops.h"

namespace rapide {

namespace {

std::vector<float> load_vector(const TensorView& view, int64_t expected) {
  if (view.element_count() != expected) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has {} elements, expected {}", view.name,
         view.element_count(), expected);
  }
  std::vector<float> out(expected);
  dequantize_row(view.type, view.data, out.data(), expected);
  return out;
}

WeightMatrix load_matrix(const ModelFile& file, const std::string& name, int64_t cols,
                         int64_t rows) {
  const TensorView& view = file.get(name);
  if (view.shape.size() != 2 || view.shape[0] != cols || view.shape[1] != rows) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has the wrong shape: expected [{}, {}]", name, cols,
         rows);
  }
  return WeightMatrix::prepare(view);
}

std::string layer_name(int layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

}  // namespace

Model::Model(std::shared_ptr<const ModelFile> file)
    : file_(std::move(file)), config_(file_->config) {
  const ModelConfig& c = config_;
  // Other architectures may carry the same tensor names (gemma2 does) yet compute something
  // else: refuse them rather than run them as Llama.
  if (c.architecture != "llama" && c.architecture != "qwen2") {
    fail(ErrorCode::kUnsupported,
         "model '{}': architecture '{}' is not supported (rapide runs llama and qwen2)",
         file_->path, c.architecture);
  }
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.n_heads % c.n_kv_heads != 0 || c.vocab_size <= 0 || c.ffn_dim <= 0 || c.head_dim % 2 != 0 ||
      c.head_dim > kMaxHeadDim) {
    fail(ErrorCode::kCorrupt,
         "model '{}' has inconsistent hyper-parameters (dim {}, layers {}, heads {}/{} kv, head "
         "dim {}, ffn {}, vocab {})",
         file_->path, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim,
         c.vocab_size);
  }
  const ModelFile& f = *file_;
  token_embedding_ = load_matrix(f, "token_embd.weight", c.dim, c.vocab_size);
  layers_.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = layers_[l];
    w.attn_norm = load_vector(f.get(layer_name(l, "attn_norm.weight")), c.dim);
    w.ffn_norm = load_vector(f.get(layer_name(l, "ffn_norm.weight")), c.dim);
    w.wq = load_matrix(f, layer_name(l, "attn_q.weight"), c.dim, c.q_dim());
    w.wk = load_matrix(f, layer_name(l, "attn_k.weight"), c.dim, c.kv_dim());
    w.wv = load_matrix(f, layer_name(l, "attn_v.weight"), c.dim, c.kv_dim());
    w.wo = load_matrix(f, layer_name(l, "attn_output.weight"), c.q_dim(), c.dim);
    if (c.qkv_bias) {
      w.bq = load_vector(f.get(layer_name(l, "attn_q.bias")), c.q_dim());
      w.bk = load_vector(f.get(layer_name(l, "attn_k.bias")), c.kv_dim());
      w.bv = load_vector(f.get(layer_name(l, "attn_v.bias")), c.kv_dim());
    }
    w.ffn_gate = load_matrix(f, layer_name(l, "ffn_gate.weight"), c.dim, c.ffn_dim);
    w.ffn_up = load_matrix(f, layer_name(l, "ffn_up.weight"), c.dim, c.ffn_dim);
    w.ffn_down = load_matrix(f, layer_name(l, "ffn_down.weight"), c.ffn_dim, c.dim);
    for (const WeightMatrix* m :
         {&w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down}) {
      weight_bytes_ += static_cast<uint64_t>(tensor_row_bytes(m->type(), m->cols())) * m->rows();
      matmul_parameters_ += static_cast<uint64_t>(m->cols()) * m->rows();
    }
  }
  output_norm_ = load_vector(f.get("output_norm.weight"), c.dim);
  const bool tied = c.tied_embeddings || f.find("output.weight") == nullptr;
  output_ = load_matrix(f, tied ? "token_embd.weight" : "output.weight", c.dim, c.vocab_size);
  weight_bytes_ +=
      static_cast<uint64_t>(tensor_row_bytes(output_.type(), output_.cols())) * output_.rows();
  matmul_parameters_ += static_cast<uint64_t>(output_.cols()) * output_.rows();
}

void Model::ensure_scratch(int n_tokens, int n_logits) {
  const ModelConfig& c = config_;
  if (n_tokens > scratch_tokens_) {
    const size_t n = static_cast<size_t>(n_tokens);
    x_.resize(n * c.dim);
    xn_.resize(n * c.dim);
    q_.resize(n * c.q_dim());
    k_.resize(n * c.kv_dim());
    v_.resize(n * c.kv_dim());
    att_.resize(n * c.q_dim());
    gate_.resize(n * c.ffn_dim);
    up_.resize(n * c.ffn_dim);
    rope_cos_.resize(n * c.head_dim / 2);
    rope_sin_.resize(n * c.head_dim / 2);
    scratch_tokens_ = n_tokens;
  }
  if (n_logits > scratch_logits_) {
    logits_in_.resize(static_cast<size_t>(n_logits) * c.dim);
    logits_.resize(static_cast<size_t>(n_logits) * c.vocab_size);
    scratch_logits_ = n_logits;
  }
}

void Model::embed(const Batch& batch) {
  for (int i = 0; i < batch.size(); ++i) {
    const int32_t token = batch.tokens[i];
    if (token < 0 || token >= config_.vocab_size) {
      fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary (0..{})", token,
           config_.vocab_size - 1);
    }
    token_embedding_.dequantize_row(token, x_.data() + static_cast<size_t>(i) * config_.dim);
  }
}

// Rotation angles as llama.cpp computes them (theta = pos * base^(-2i/d), the power taken
// by repeated multiplication), so rotated values match its reference runs bit for bit.
// Computed once per forward pass: every layer rotates by the same angles.
void Model::prepare_rope(const Batch& batch) {
  const ModelConfig& c = config_;
  const int half = c.head_dim / 2;
  const float theta_scale = std::pow(c.rope_theta, -2.0f / static_cast<float>(c.head_dim));
  const float freq_scale = 1.0f / c.rope_scale;
  for (int i = 0; i < batch.size(); ++i) {
    float theta = static_cast<float>(batch.positions[i]);
    float* cos_row = rope_cos_.data() + static_cast<size_t>(i) * half;
    float* sin_row = rope_sin_.data() + static_cast<size_t>(i) * half;
    for (int j = 0; j < half; ++j) {
      cos_row[j] = std::cos(theta * freq_scale);
      sin_row[j] = std::sin(theta * freq_scale);
      theta *= theta_scale;
    }
  }
}

void Model::apply_rope(int begin, int end) {
  const ModelConfig& c = config_;
  const int half = c.head_dim / 2;
  const bool neox = c.rope_style == RopeStyle::kNeox;
  for (int i = begin; i < end; ++i) {
    const float* cos_row = rope_cos_.data() + static_cast<size_t>(i) * half;
    const float* sin_row = rope_sin_.data() + static_cast<size_t>(i) * half;
    float* q = q_.data() + static_cast<size_t>(i) * c.q_dim();
    float* k = k_.data() + static_cast<size_t>(i) * c.kv_dim();
    rope_rotate(q, c.n_heads, c.head_dim, cos_row, sin_row, neox);
    rope_rotate(k, c.n_kv_heads, c.head_dim, cos_row, sin_row, neox);
  }
}

// The per-token work between the matrix multiplies (norms, rope, the KV write, residual
// adds, the gated activation) is split over the pool by tokens: in a batch of a few hundred
// rows it is a fifth of the step when one thread does it while the others wait.
// Each token's arithmetic is the same whichever thread runs it. A chunk gets at least
// kMinChunkFloats of row data: below that a dispatch costs more than it saves (a tiny model's
// rows, or a decode step of a few sequences, stay on the calling thread).
namespace {
constexpr int64_t kMinChunkFloats = 16384;

template <typename F>
void for_tokens(ThreadPool& pool, int n, int64_t row_floats, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, kMinChunkFloats / std::max<int64_t>(1, row_floats));
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int) {
    fn(static_cast<int>(begin), static_cast<int>(end));
  });
}
}  // namespace

void Model::attention_block(int layer, const Batch& batch, KvStore& kv, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int n = batch.size();
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      rms_norm(x_.data() + static_cast<size_t>(i) * c.dim, w.attn_norm.data(), c.dim, c.rms_eps,
               xn_.data() + static_cast<size_t>(i) * c.dim);
    }
  });
  const WeightMatrix* qkv[] = {&w.wq, &w.wk, &w.wv};
  float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
  WeightMatrix::multiply_group(qkv, xn_.data(), n, qkv_out, pool);
  for_tokens(pool, n, c.q_dim() + 2 * c.kv_dim(), [&](int begin, int end) {
    if (c.qkv_bias) {
      for (int i = begin; i < end; ++i) {
        add_in_place(q_.data() + static_cast<size_t>(i) * c.q_dim(), w.bq.data(), c.q_dim());
        add_in_place(k_.data() + static_cast<size_t>(i) * c.kv_dim(), w.bk.data(), c.kv_dim());
        add_in_place(v_.data() + static_cast<size_t>(i) * c.kv_dim(), w.bv.data(), c.kv_dim());
      }
    }
    apply_rope(begin, end);
    Attention::write_kv(kv, layer, batch, k_.data(), v_.data(), begin, end);
  });
  attention_.attend_planned(kv, layer, batch, q_.data(), c.n_heads, att_.data(), pool);
  // The output projection lands in xn_ (free now), then joins the residual stream.
  w.wo.multiply(att_.data(), n, xn_.data(), pool);
}

void Model::ffn_block(int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  // The attention output (in xn_) joins the residual stream, then the FFN's norm reads it.
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      float* x = x_.data() + static_cast<size_t>(i) * c.dim;
      float* xn = xn_.data() + static_cast<size_t>(i) * c.dim;
      add_in_place(x, xn, c.dim);
      rms_norm(x, w.ffn_norm.data(), c.dim, c.rms_eps, xn);
    }
  });
  const WeightMatrix* gate_up[] = {&w.ffn_gate, &w.ffn_up};
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  WeightMatrix::multiply_group(gate_up, xn_.data(), n, gate_up_out, pool);
  for_tokens(pool, n, c.ffn_dim, [&](int begin, int end) {
    const size_t from = static_cast<size_t>(begin) * c.ffn_dim;
    silu_mul(gate_.data() + from, up_.data() + from, static_cast<int64_t>(end - begin) * c.ffn_dim,
             gate_.data() + from);
  });
  w.ffn_down.multiply(gate_.data(), n, xn_.data(), pool);
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    const size_t from = static_cast<size_t>(begin) * c.dim;
    add_in_place(x_.data() + from, xn_.data() + from, static_cast<int64_t>(end - begin) * c.dim);
  });
}

std::span<const float> Model::forward(const Batch& batch, KvStore& kv, ThreadPool& pool) {
  const int n = batch.size();
  if (n == 0) return {};
  const int n_logits = batch.logits_count();
  ensure_scratch(n, n_logits);
  embed(batch);
  prepare_rope(batch);
  // Every layer's attention runs the same jobs. Blocks are in place: the caller made the
  // block tables cover every position the batch writes.
  attention_.plan(kv, batch, config_.n_heads);
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    attention_block(layer, batch, kv, pool);
    ffn_block(layer, n, pool);
  }
  if (n_logits == 0) return {};
  // Only the rows that need logits pay for the final norm and the (large) output head.
  const int dim = config_.dim;
  int row = 0;
  for (int i = 0; i < n; ++i) {
    if (!batch.needs_logits[i]) continue;
    rms_norm(x_.data() + static_cast<size_t>(i) * dim, output_norm_.data(), dim, config_.rms_eps,
             logits_in_.data() + static_cast<size_t>(row) * dim);
    ++row;
  }
  output_.multiply(logits_in_.data(), n_logits, logits_.data(), pool);
  return {logits_.data(), static_cast<size_t>(n_logits) * config_.vocab_size};
}

}  // namespace rapide
