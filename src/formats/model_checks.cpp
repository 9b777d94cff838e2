#include "formats/model_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "formats/architecture.h"

namespace rapide {
namespace {

// Trailing dimensions of 1 do not change a tensor's layout, and llama.cpp ignores them (a
// converted Qwen1.5-MoE stores its shared-expert gate as {dim, 1}, read as {dim}).
std::vector<int64_t> without_trailing_ones(std::vector<int64_t> shape) {
  while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
  return shape;
}

void expect_shape(const ModelFile& m, const std::string& name, std::vector<int64_t> shape) {
  const TensorView* t = m.find(name);
  if (t == nullptr) fail(ErrorCode::kCorrupt, "'{}': missing tensor '{}'", m.path, name);
  if (without_trailing_ones(t->shape) != without_trailing_ones(shape)) {
    fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has shape [{}], expected [{}] from the config",
         m.path, name, fmt::join(t->shape, ", "), fmt::join(shape, ", "));
  }
}

void expect_positive(const ModelFile& m, const char* what, int value) {
  if (value <= 0)
    fail(ErrorCode::kCorrupt, "'{}': {} is {} (must be positive)", m.path, what, value);
}

// deepseek2's multi-head latent attention (model/mla_attention.h).
void expect_mla_shapes(const ModelFile& m, const std::string& b) {
  const ModelConfig& c = m.config;
  const int64_t dim = c.dim, heads = c.n_heads, kv_lora = c.kv_lora_rank;
  const int64_t q_head = c.mla_nope_dim + c.mla_rope_dim;
  if (c.q_lora_rank > 0) {
    expect_shape(m, b + "attn_q_a.weight", {dim, c.q_lora_rank});
    expect_shape(m, b + "attn_q_a_norm.weight", {c.q_lora_rank});
    expect_shape(m, b + "attn_q_b.weight", {c.q_lora_rank, heads * q_head});
  } else {
    expect_shape(m, b + "attn_q.weight", {dim, heads * q_head});
  }
  expect_shape(m, b + "attn_kv_a_mqa.weight", {dim, kv_lora + c.mla_rope_dim});
  expect_shape(m, b + "attn_kv_a_norm.weight", {kv_lora});
  expect_shape(m, b + "attn_kv_b.weight", {kv_lora, heads * (c.mla_nope_dim + c.mla_v_dim)});
  expect_shape(m, b + "attn_output.weight", {heads * c.mla_v_dim, dim});
}

}  // namespace

void check_model(const ModelFile& m) {
  const ModelConfig& c = m.config;
  if (c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads != 0) {
    fail(ErrorCode::kCorrupt, "'{}': {} attention heads are not a multiple of {} KV heads", m.path,
         c.n_heads, c.n_kv_heads);
  }
  const TokenizerData& tok = m.tokenizer;
  if (tok.kind != TokenizerKind::kNone &&
      (tok.scores.size() != tok.tokens.size() || tok.types.size() != tok.tokens.size())) {
    fail(ErrorCode::kInternal, "'{}': tokenizer arrays differ in length", m.path);
  }
  if (m.tensors.empty()) return;  // vocabulary-only file
  if (!is_supported_architecture(c.architecture)) {
    fail(ErrorCode::kUnsupported, "'{}': architecture '{}' is not supported (rapide runs {})",
         m.path, c.architecture, supported_architectures());
  }
  // Per-frequency rope factors: Llama 3's one set, LongRoPE's two (short and long context).
  const int64_t half_rot = c.rotary_dims() / 2;
  if (c.rope_freq_factors) expect_shape(m, "rope_freqs.weight", {half_rot});
  const bool long_factors = m.find("rope_factors_long.weight") != nullptr ||
                            m.find("rope_factors_short.weight") != nullptr;
  if (long_factors != (c.rope_scaling == RopeScaling::kLongRope)) {
    fail(ErrorCode::kCorrupt,
         "'{}': LongRoPE needs both rope_factors_short.weight and rope_factors_long.weight and "
         "rope.scaling.type = longrope; this file has only one side",
         m.path);
  }
  if (long_factors) {
    expect_shape(m, "rope_factors_short.weight", {half_rot});
    expect_shape(m, "rope_factors_long.weight", {half_rot});
    if (c.rope_orig_context <= 0) {
      fail(ErrorCode::kCorrupt, "'{}': LongRoPE without rope.scaling.original_context_length",
           m.path);
    }
  }
  if (c.rope_freq_factors && long_factors) {
    fail(ErrorCode::kCorrupt, "'{}': both rope_freqs.weight and LongRoPE factors", m.path);
  }
  if (c.n_experts == 0 && m.find("blk.0.ffn_gate_inp.weight") != nullptr) {
    fail(ErrorCode::kCorrupt,
         "'{}': mixture-of-experts tensor blk.0.ffn_gate_inp.weight without {}.expert_count",
         m.path, c.architecture);
  }
  if (c.n_experts > 0 &&
      (c.n_experts_used <= 0 || c.n_experts_used > c.n_experts || c.expert_ffn_dim <= 0)) {
    fail(ErrorCode::kCorrupt, "'{}': {} experts with {} used per token and width {}", m.path,
         c.n_experts, c.n_experts_used, c.expert_ffn_dim);
  }

  expect_positive(m, "embedding width", c.dim);
  expect_positive(m, "layer count", c.n_layers);
  expect_positive(m, "head count", c.n_heads);
  expect_positive(m, "KV head count", c.n_kv_heads);
  expect_positive(m, "head size", c.head_dim);
  if (c.n_experts == 0 || c.leading_dense_layers > 0) {
    expect_positive(m, "feed-forward width", c.ffn_dim);
  }
  expect_positive(m, "vocabulary size", c.vocab_size);
  if (tok.kind != TokenizerKind::kNone && tok.tokens.size() != static_cast<size_t>(c.vocab_size)) {
    fail(ErrorCode::kCorrupt, "'{}': the tokenizer has {} tokens but the model's vocabulary is {}",
         m.path, tok.tokens.size(), c.vocab_size);
  }
  const int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), ffn = c.ffn_dim, vocab = c.vocab_size;
  expect_shape(m, "token_embd.weight", {dim, vocab});
  expect_shape(m, "output_norm.weight", {dim});
  if (!c.tied_embeddings) expect_shape(m, "output.weight", {dim, vocab});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    if (c.pre_norms) expect_shape(m, b + "attn_norm.weight", {dim});
    if (c.mla()) {
      expect_mla_shapes(m, b);
    } else if (c.fused_qkv) {
      expect_shape(m, b + "attn_qkv.weight", {dim, q + 2 * kv});
    } else {
      expect_shape(m, b + "attn_q.weight", {dim, q});
      expect_shape(m, b + "attn_k.weight", {dim, kv});
      expect_shape(m, b + "attn_v.weight", {dim, kv});
    }
    if (!c.mla()) expect_shape(m, b + "attn_output.weight", {q, dim});
    if (c.pre_norms && !c.parallel_block) expect_shape(m, b + "ffn_norm.weight", {dim});
    if (c.qk_norm == QkNorm::kPerHead) {
      expect_shape(m, b + "attn_q_norm.weight", {c.head_dim});
      expect_shape(m, b + "attn_k_norm.weight", {c.head_dim});
    } else if (c.qk_norm == QkNorm::kWhole) {
      expect_shape(m, b + "attn_q_norm.weight", {q});
      expect_shape(m, b + "attn_k_norm.weight", {kv});
    }
    if (c.post_norms) {
      expect_shape(m, b + "post_attention_norm.weight", {dim});
      expect_shape(m, b + "post_ffw_norm.weight", {dim});
    }
    if (c.n_experts > 0 && l >= c.leading_dense_layers) {
      const int64_t e = c.n_experts, ef = c.expert_ffn_dim;
      expect_shape(m, b + "ffn_gate_inp.weight", {dim, e});
      expect_shape(m, b + "ffn_gate_exps.weight", {dim, ef, e});
      expect_shape(m, b + "ffn_up_exps.weight", {dim, ef, e});
      expect_shape(m, b + "ffn_down_exps.weight", {ef, dim, e});
      if (c.expert_selection_bias) expect_shape(m, b + "exp_probs_b.bias", {e});
      if (c.shared_expert_ffn_dim > 0) {
        const int64_t sf = c.shared_expert_ffn_dim;
        if (c.shared_expert_gated) expect_shape(m, b + "ffn_gate_inp_shexp.weight", {dim});
        expect_shape(m, b + "ffn_gate_shexp.weight", {dim, sf});
        expect_shape(m, b + "ffn_up_shexp.weight", {dim, sf});
        expect_shape(m, b + "ffn_down_shexp.weight", {sf, dim});
      }
    } else if (c.fused_gate_up) {
      expect_shape(m, b + "ffn_up.weight", {dim, 2 * ffn});
      expect_shape(m, b + "ffn_down.weight", {ffn, dim});
    } else {
      expect_shape(m, b + "ffn_gate.weight", {dim, ffn});
      expect_shape(m, b + "ffn_up.weight", {dim, ffn});
      expect_shape(m, b + "ffn_down.weight", {ffn, dim});
    }
    if (c.qkv_bias) {
      expect_shape(m, b + "attn_q.bias", {q});
      expect_shape(m, b + "attn_k.bias", {kv});
      expect_shape(m, b + "attn_v.bias", {kv});
    }
  }
}

}  // namespace rapide
