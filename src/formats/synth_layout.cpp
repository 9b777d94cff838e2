#include "formats/synth_layout.h"

#include <fmt/format.h>

namespace rapide {
namespace {

GgufValue u32(int v) {
  return GgufValue::u32(static_cast<uint32_t>(v));
}

// The keys every architecture but llama shares (llama keeps set_llama_hyperparameters' order).
void set_common(GgufWriter& w, const std::string& p, const SynthShape& s) {
  const LlamaShape& b = s.base;
  w.set("general.architecture", GgufValue::string(synth_arch_name(s.arch)));
  w.set(p + "context_length", u32(b.ctx));
  w.set(p + "embedding_length", u32(b.dim));
  w.set(p + "block_count", u32(b.layers));
  w.set(p + "feed_forward_length", u32(b.ffn));
  w.set(p + "attention.head_count", u32(b.heads));
  w.set(p + "attention.head_count_kv", u32(b.kv_heads));
  w.set(p + "rope.freq_base", GgufValue::f32(b.rope_base));
  w.set(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(b.rms_eps));
}

}  // namespace

void set_synth_hyperparameters(GgufWriter& w, const SynthShape& s) {
  if (s.arch == SynthArch::kLlama) {
    set_llama_hyperparameters(w, s.base);
    return;
  }
  const std::string p = std::string(synth_arch_name(s.arch)) + ".";
  set_common(w, p, s);
  switch (s.arch) {
    case SynthArch::kLlama:
      break;
    case SynthArch::kQwen3:
      w.set(p + "attention.key_length", u32(s.key_dim()));
      w.set(p + "attention.value_length", u32(s.value_dim()));
      break;
    case SynthArch::kGemma3:
      w.set(p + "attention.key_length", u32(s.key_dim()));
      w.set(p + "attention.value_length", u32(s.value_dim()));
      w.set(p + "attention.sliding_window", u32(s.window));
      if (s.rope_scale > 1) {
        w.set(p + "rope.scaling.type", GgufValue::string("linear"));
        w.set(p + "rope.scaling.factor", GgufValue::f32(static_cast<float>(s.rope_scale)));
      }
      break;
    case SynthArch::kDeepseek2:
      w.set(p + "leading_dense_block_count", u32(s.dense_layers));
      w.set(p + "vocab_size", GgufValue::u32(static_cast<uint32_t>(s.base.vocab)));
      w.set(p + "attention.q_lora_rank", u32(s.q_lora_rank));
      w.set(p + "attention.kv_lora_rank", u32(s.kv_lora_rank));
      w.set(p + "attention.key_length", u32(s.key_dim()));
      w.set(p + "attention.value_length", u32(s.value_dim()));
      w.set(p + "expert_feed_forward_length", u32(s.expert_ffn));
      w.set(p + "expert_count", u32(s.experts));
      w.set(p + "expert_used_count", u32(s.experts_used));
      w.set(p + "expert_shared_count", u32(s.shared_experts));
      w.set(p + "expert_weights_scale", GgufValue::f32(2.5f));
      w.set(p + "expert_weights_norm", GgufValue::boolean(true));
      w.set(p + "expert_gating_func", u32(2));  // sigmoid (DeepSeek-V3)
      w.set(p + "rope.dimension_count", u32(s.rope_dim));
      // No YaRN scaling is written, so this has no effect, but llama.cpp's loader requires it.
      w.set(p + "rope.scaling.yarn_log_multiplier", GgufValue::f32(0.1f));
      break;
  }
}

std::vector<SynthTensor> synth_tensors(const SynthShape& s) {
  using Fill = SynthTensor::Fill;
  const LlamaShape& b = s.base;
  const int64_t dim = b.dim, vocab = b.vocab;
  const bool tied = s.arch == SynthArch::kGemma3;
  std::vector<SynthTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> shape, Fill fill = Fill::kWeights,
                 double share = 1.0) {
    t.push_back({std::move(name), std::move(shape), fill, share});
  };
  // A token reads one row of the table, unless the table is also the output head.
  add("token_embd.weight", {dim, vocab}, Fill::kWeights, tied ? 1.0 : 1.0 / vocab);

  const int64_t q_dim = static_cast<int64_t>(b.heads) * s.key_dim();
  const int64_t kv_dim = static_cast<int64_t>(b.kv_heads) * s.key_dim();
  const int64_t out_dim = static_cast<int64_t>(b.heads) * s.value_dim();
  for (int l = 0; l < b.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    if (s.arch == SynthArch::kDeepseek2) {
      const int64_t q_lora = s.q_lora_rank, kv_lora = s.kv_lora_rank;
      add(p + "attn_norm.weight", {dim}, Fill::kOnes);
      add(p + "attn_q_a_norm.weight", {q_lora}, Fill::kOnes);
      add(p + "attn_kv_a_norm.weight", {kv_lora}, Fill::kOnes);
      add(p + "attn_q_a.weight", {dim, q_lora});
      add(p + "attn_q_b.weight", {q_lora, q_dim});
      add(p + "attn_kv_a_mqa.weight", {dim, kv_lora + s.rope_dim});
      add(p + "attn_kv_b.weight",
          {kv_lora, static_cast<int64_t>(b.heads) * (s.nope_dim + s.v_dim)});
      add(p + "attn_output.weight", {out_dim, dim});
      add(p + "ffn_norm.weight", {dim}, Fill::kOnes);
      if (l < s.dense_layers) {
        add(p + "ffn_gate.weight", {dim, b.ffn});
        add(p + "ffn_up.weight", {dim, b.ffn});
        add(p + "ffn_down.weight", {b.ffn, dim});
        continue;
      }
      const int64_t e = s.experts, eff = s.expert_ffn;
      const double used = static_cast<double>(s.experts_used) / s.experts;
      add(p + "ffn_gate_inp.weight", {dim, e}, Fill::kRouter);
      add(p + "exp_probs_b.bias", {e}, Fill::kBias);
      add(p + "ffn_gate_exps.weight", {dim, eff, e}, Fill::kWeights, used);
      add(p + "ffn_down_exps.weight", {eff, dim, e}, Fill::kWeights, used);
      add(p + "ffn_up_exps.weight", {dim, eff, e}, Fill::kWeights, used);
      if (s.shared_experts > 0) {
        const int64_t shared = eff * s.shared_experts;
        add(p + "ffn_gate_shexp.weight", {dim, shared});
        add(p + "ffn_down_shexp.weight", {shared, dim});
        add(p + "ffn_up_shexp.weight", {dim, shared});
      }
      continue;
    }
    add(p + "attn_norm.weight", {dim}, Fill::kOnes);
    add(p + "attn_q.weight", {dim, q_dim});
    add(p + "attn_k.weight", {dim, kv_dim});
    add(p + "attn_v.weight", {dim, kv_dim});
    add(p + "attn_output.weight", {out_dim, dim});
    if (s.arch == SynthArch::kQwen3 || s.arch == SynthArch::kGemma3) {
      add(p + "attn_q_norm.weight", {s.key_dim()}, Fill::kOnes);
      add(p + "attn_k_norm.weight", {s.key_dim()}, Fill::kOnes);
    }
    if (s.arch == SynthArch::kGemma3) add(p + "post_attention_norm.weight", {dim}, Fill::kOnes);
    add(p + "ffn_norm.weight", {dim}, Fill::kOnes);
    add(p + "ffn_gate.weight", {dim, b.ffn});
    add(p + "ffn_up.weight", {dim, b.ffn});
    add(p + "ffn_down.weight", {b.ffn, dim});
    if (s.arch == SynthArch::kGemma3) add(p + "post_ffw_norm.weight", {dim}, Fill::kOnes);
  }
  add("output_norm.weight", {dim}, Fill::kOnes);
  if (!tied) add("output.weight", {dim, vocab});
  return t;
}

}  // namespace rapide
