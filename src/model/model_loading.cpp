// Loading a Model: reading its weights from the file (quantized as stored, fused tensors split
// into row ranges, experts unstacked), sharding them for tensor parallelism (a rank keeps its
// heads and FFN columns) or pipeline parallelism (a stage keeps its layers), and refusing a
// file with tensors the architecture does not use. The forward pass is in model.cpp.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "formats/architecture.h"
#include "formats/unused_tensors.h"
#include "kernels/ops.h"
#include "model/moe_routing.h"
#include "model/rope.h"

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

WeightMatrix load_matrix(const ModelFile& file, const std::string& name, int64_t cols, int64_t rows,
                         ActQuant act) {
  const TensorView& view = file.get(name);
  if (view.shape.size() != 2 || view.shape[0] != cols || view.shape[1] != rows) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has the wrong shape: expected [{}, {}]", name, cols,
         rows);
  }
  return WeightMatrix::prepare(view, act);
}

// Rows [begin, end) of a matrix stored with `rows` rows: one part of a fused tensor, or one
// expert of a stacked [cols, rows_per_expert, n_experts] tensor (seen as 2-D).
WeightMatrix load_matrix_rows(const ModelFile& file, const std::string& name, int64_t cols,
                              int64_t rows, int64_t begin, int64_t end, ActQuant act) {
  TensorView view = file.get(name);
  if (view.row_length() != cols || view.rows() != rows) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has the wrong shape: expected {} rows of {}", name, rows,
         cols);
  }
  view.shape = {cols, rows};
  return WeightMatrix::prepare_rows(view, begin, end, act);
}

// Columns [begin, end) of a [cols, rows] matrix: a row-parallel shard (all of it when the
// range is whole).
WeightMatrix load_matrix_columns(const ModelFile& file, const std::string& name, int64_t cols,
                                 int64_t rows, SliceRange range, ActQuant act) {
  if (range.begin == 0 && range.end == cols) return load_matrix(file, name, cols, rows, act);
  const TensorView& view = file.get(name);
  if (view.shape.size() != 2 || view.shape[0] != cols || view.shape[1] != rows) {
    fail(ErrorCode::kCorrupt, "tensor '{}' has the wrong shape: expected [{}, {}]", name, cols,
         rows);
  }
  return prepare_columns(view, range.begin, range.end, act);
}

// Elements [begin, end) of a vector of `total` (a bias of this rank's heads).
std::vector<float> load_vector_slice(const TensorView& view, int64_t total, SliceRange range) {
  std::vector<float> all = load_vector(view, total);
  return std::vector<float>(all.begin() + range.begin, all.begin() + range.end);
}

std::string layer_name(int layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

}  // namespace

Model::Model(std::shared_ptr<const ModelFile> file, ActQuant act, TensorParallel* tp,
             PipelineParallel* pp)
    : file_(std::move(file)), config_(file_->config), tp_(tp), pp_(pp) {
  const ModelConfig& c = config_;
  // Other architectures may carry the same tensor names (gemma3 does) yet compute something
  // else: refuse them rather than run them as Llama.
  if (!is_supported_architecture(c.architecture)) {
    fail(ErrorCode::kUnsupported, "model '{}': architecture '{}' is not supported (rapide runs {})",
         file_->path, c.architecture, supported_architectures());
  }
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.n_heads % c.n_kv_heads != 0 || c.vocab_size <= 0 ||
      (c.n_experts == 0 ? c.ffn_dim <= 0 : c.expert_ffn_dim <= 0) || c.head_dim % 2 != 0 ||
      c.head_dim > kMaxHeadDim) {
    fail(ErrorCode::kCorrupt,
         "model '{}' has inconsistent hyper-parameters (dim {}, layers {}, heads {}/{} kv, head "
         "dim {}, ffn {}, vocab {})",
         file_->path, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim,
         c.vocab_size);
  }
  const ModelFile& f = *file_;
  // This rank's shard (all of every tensor without tensor parallelism): q/kv rows of its
  // heads, FFN rows of its slice, vocabulary rows of its slice (model/tensor_parallel.h).
  const int parts = tp_ != nullptr ? tp_->size() : 1, rank = tp_ != nullptr ? tp_->rank() : 0;
  check_tensor_split(f, parts);
  const ModelConfig full = config_;
  config_ = shard_config(full, parts);
  // This stage's layers (all of them without pipeline parallelism).
  const int stages = pp_ != nullptr ? pp_->stages() : 1, stage = pp_ != nullptr ? pp_->stage() : 0;
  if (parts > 1 && c.qk_norm == QkNorm::kWhole) {
    fail(ErrorCode::kUnsupported,
         "'{}': {}'s q/k norm runs over all heads together, which a tensor-parallel rank "
         "holding some heads cannot compute",
         f.path, c.architecture);
  }
  if (stages > full.n_layers) {
    fail(ErrorCode::kInvalidArgument, "cannot split the {} layers of '{}' over {} pipeline stages",
         full.n_layers, f.path, stages);
  }
  const SliceRange stage_layers = slice_range(full.n_layers, stages, stage);
  first_layer_ = static_cast<int>(stage_layers.begin);
  config_.n_layers = static_cast<int>(stage_layers.size());
  has_input_ = stage == 0;
  has_output_ = stage == stages - 1;
  const int64_t q_all = full.q_dim(), kv_all = full.kv_dim(), ffn_all = full.ffn_dim;
  const SliceRange q_rows = slice_range(q_all, parts, rank);
  const SliceRange kv_rows = slice_range(kv_all, parts, rank);
  const SliceRange ffn_rows = slice_range(ffn_all, parts, rank);
  vocab_slice_ = slice_range(c.vocab_size, parts, rank);
  const auto shift = [](SliceRange r, int64_t by) { return SliceRange{r.begin + by, r.end + by}; };
  if (has_input_) {
    token_embedding_ = load_matrix_rows(f, "token_embd.weight", c.dim, c.vocab_size,
                                        vocab_slice_.begin, vocab_slice_.end, act);
  }
  if (c.rope_freq_factors) {
    rope_factors_ = load_vector(f.get("rope_freqs.weight"), c.rotary_dims() / 2);
  }
  set_serving_context(c.max_context);
  layers_.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const int l = first_layer_ + i;  // the file's layer
    LayerWeights& w = layers_[i];
    if (c.pre_norms) {
      w.attn_norm = load_vector(f.get(layer_name(l, "attn_norm.weight")), c.dim);
      if (!c.parallel_block) {
        w.ffn_norm = load_vector(f.get(layer_name(l, "ffn_norm.weight")), c.dim);
      }
    }
    if (c.qk_norm == QkNorm::kPerHead) {
      w.q_norm = load_vector(f.get(layer_name(l, "attn_q_norm.weight")), c.head_dim);
      w.k_norm = load_vector(f.get(layer_name(l, "attn_k_norm.weight")), c.head_dim);
    } else if (c.qk_norm == QkNorm::kWhole) {
      w.q_norm = load_vector(f.get(layer_name(l, "attn_q_norm.weight")), c.q_dim());
      w.k_norm = load_vector(f.get(layer_name(l, "attn_k_norm.weight")), c.kv_dim());
    }
    if (c.mla()) {  // deepseek2: model/mla_attention.h
      w.mla = load_mla_weights(f, full, l, act);
    } else {
      // Q, K and V of one fused matrix sit at row offsets 0, q_all and q_all + kv_all.
      const bool fused = c.fused_qkv;
      const std::string qkv_name = layer_name(l, "attn_qkv.weight");
      const int64_t qkv_rows = fused ? q_all + 2 * kv_all : 0;
      const auto qkv_part = [&](const char* name, int64_t rows, SliceRange range, int64_t offset) {
        const SliceRange r = shift(range, fused ? offset : 0);
        return fused ? load_matrix_rows(f, qkv_name, c.dim, qkv_rows, r.begin, r.end, act)
                     : load_matrix_rows(f, layer_name(l, name), c.dim, rows, r.begin, r.end, act);
      };
      w.wq = qkv_part("attn_q.weight", q_all, q_rows, 0);
      w.wk = qkv_part("attn_k.weight", kv_all, kv_rows, q_all);
      w.wv = qkv_part("attn_v.weight", kv_all, kv_rows, q_all + kv_all);
      w.wo = load_matrix_columns(f, layer_name(l, "attn_output.weight"), q_all, c.dim, q_rows, act);
      if (c.qkv_bias) {
        w.bq = load_vector_slice(f.get(layer_name(l, "attn_q.bias")), q_all, q_rows);
        w.bk = load_vector_slice(f.get(layer_name(l, "attn_k.bias")), kv_all, kv_rows);
        w.bv = load_vector_slice(f.get(layer_name(l, "attn_v.bias")), kv_all, kv_rows);
      }
    }
    if (c.post_norms) {
      w.post_attn_norm = load_vector(f.get(layer_name(l, "post_attention_norm.weight")), c.dim);
      w.post_ffn_norm = load_vector(f.get(layer_name(l, "post_ffw_norm.weight")), c.dim);
    }
    std::vector<const WeightMatrix*> every_token =
        c.mla() ? w.mla.matrices() : std::vector<const WeightMatrix*>{&w.wq, &w.wk, &w.wv, &w.wo};
    std::vector<const WeightMatrix*> per_expert;
    if (moe_layer(i)) {
      const int64_t e = c.n_experts, ef = c.expert_ffn_dim;
      w.router = load_matrix(f, layer_name(l, "ffn_gate_inp.weight"), c.dim, e, act);
      if (c.expert_selection_bias) {
        w.expert_bias = load_vector(f.get(layer_name(l, "exp_probs_b.bias")), e);
      }
      for (int x = 0; x < c.n_experts; ++x) {
        w.expert_gate.push_back(load_matrix_rows(f, layer_name(l, "ffn_gate_exps.weight"), c.dim,
                                                 ef * e, x * ef, (x + 1) * ef, act));
        w.expert_up.push_back(load_matrix_rows(f, layer_name(l, "ffn_up_exps.weight"), c.dim,
                                               ef * e, x * ef, (x + 1) * ef, act));
        w.expert_down.push_back(load_matrix_rows(f, layer_name(l, "ffn_down_exps.weight"), ef,
                                                 c.dim * e, x * c.dim, (x + 1) * c.dim, act));
      }
      every_token.push_back(&w.router);
      for (int x = 0; x < c.n_experts; ++x) {
        per_expert.insert(per_expert.end(),
                          {&w.expert_gate[x], &w.expert_up[x], &w.expert_down[x]});
      }
      if (c.shared_expert_ffn_dim > 0) {
        const int64_t sf = c.shared_expert_ffn_dim;
        if (c.shared_expert_gated) {
          w.shared_gate_inp = load_vector(f.get(layer_name(l, "ffn_gate_inp_shexp.weight")), c.dim);
        }
        w.shared_gate = load_matrix(f, layer_name(l, "ffn_gate_shexp.weight"), c.dim, sf, act);
        w.shared_up = load_matrix(f, layer_name(l, "ffn_up_shexp.weight"), c.dim, sf, act);
        w.shared_down = load_matrix(f, layer_name(l, "ffn_down_shexp.weight"), sf, c.dim, act);
        every_token.insert(every_token.end(), {&w.shared_gate, &w.shared_up, &w.shared_down});
      }
    } else {
      const SliceRange fr = ffn_rows;
      if (c.fused_gate_up) {
        const std::string name = layer_name(l, "ffn_up.weight");
        const SliceRange up = shift(fr, ffn_all);
        w.ffn_gate = load_matrix_rows(f, name, c.dim, 2 * ffn_all, fr.begin, fr.end, act);
        w.ffn_up = load_matrix_rows(f, name, c.dim, 2 * ffn_all, up.begin, up.end, act);
      } else {
        w.ffn_gate = load_matrix_rows(f, layer_name(l, "ffn_gate.weight"), c.dim, ffn_all, fr.begin,
                                      fr.end, act);
        w.ffn_up = load_matrix_rows(f, layer_name(l, "ffn_up.weight"), c.dim, ffn_all, fr.begin,
                                    fr.end, act);
      }
      w.ffn_down =
          load_matrix_columns(f, layer_name(l, "ffn_down.weight"), ffn_all, c.dim, fr, act);
      every_token.insert(every_token.end(), {&w.ffn_gate, &w.ffn_up, &w.ffn_down});
    }
    // weight_bytes_ counts every weight (what a large batch reads once per step); a token
    // multiplies through only its n_experts_used experts.
    for (const WeightMatrix* m : every_token) {
      weight_bytes_ += static_cast<uint64_t>(tensor_row_bytes(m->type(), m->cols())) * m->rows();
      matmul_parameters_ += static_cast<uint64_t>(m->cols()) * m->rows();
    }
    for (const WeightMatrix* m : per_expert) {
      const uint64_t bytes =
          static_cast<uint64_t>(tensor_row_bytes(m->type(), m->cols())) * m->rows();
      weight_bytes_ += bytes;
      all_expert_bytes_ += bytes;
      matmul_parameters_ +=
          static_cast<uint64_t>(m->cols()) * m->rows() * c.n_experts_used / c.n_experts;
    }
  }
  // Every other tensor of the file must be known not to change the computation.
  const TensorScope taken{first_layer_, config_.n_layers, has_input_ && has_output_};
  if (!has_output_) {
    refuse_unused_tensors(f, taken);
    return;
  }
  output_norm_ = load_vector(f.get("output_norm.weight"), c.dim);
  const bool tied = c.tied_embeddings || f.find("output.weight") == nullptr;
  output_ = load_matrix_rows(f, tied ? "token_embd.weight" : "output.weight", c.dim, c.vocab_size,
                             vocab_slice_.begin, vocab_slice_.end, act);
  weight_bytes_ +=
      static_cast<uint64_t>(tensor_row_bytes(output_.type(), output_.cols())) * output_.rows();
  matmul_parameters_ += static_cast<uint64_t>(output_.cols()) * output_.rows();
  refuse_unused_tensors(f, taken);
}

// Phi-3's LongRoPE keeps two factor tables; which one applies depends on the context served.
void Model::set_serving_context(int max_context) {
  const ModelConfig& c = config_;
  if (c.rope_scaling != RopeScaling::kLongRope) return;
  const bool long_context = max_context > c.rope_orig_context;
  const char* name = long_context ? "rope_factors_long.weight" : "rope_factors_short.weight";
  rope_factors_ = load_vector(file_->get(name), c.rotary_dims() / 2);
}

}  // namespace rapide
