// What a `rapide synth` model of a SynthShape is as a GGUF: its {arch}.* keys and its tensors
// (names, shapes in GGUF order, what each holds), exactly as llama.cpp's converter writes that
// architecture and its loader reads it:
//   llama     llama.* keys and tensors (synth100m, byte for byte as before --arch existed);
//   qwen3     llama's tensors plus per-head blk.N.attn_{q,k}_norm [head_dim], untied output,
//             attention.key_length / value_length (NEOX rope is implied by the architecture);
//   gemma3    attn_norm, attn_q/k/v/output, attn_{q,k}_norm [head_dim], post_attention_norm,
//             ffn_norm, ffn_gate/up/down, post_ffw_norm; tied output (no output.weight);
//             attention.sliding_window, rope.scaling.type linear + factor when rope_scale > 1;
//   deepseek2 the keys and tensors of shared/reference/llamacpp2/README.md section 3.3: MLA
//             (attn_q_a, attn_q_a_norm, attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b),
//             leading dense layers, then routed experts (ffn_{gate,up,down}_exps stacked along
//             the last dimension, sigmoid router ffn_gate_inp, exp_probs_b.bias) and shared
//             experts (ffn_*_shexp).
// Norm weights are 1 (for gemma3 that is the stored 1 + w of a zero-centred w, as llama.cpp's
// converter stores Gemma's norms).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf_writer.h"
#include "formats/synth_shape.h"

namespace rapide {

struct SynthTensor {
  enum class Fill {
    kWeights,  // random N(0, std) in the chosen weight type
    kOnes,     // F32 1.0 (norms)
    kRouter,   // F32 random (llama.cpp never quantizes ffn_gate_inp)
    kBias,     // F32 random (exp_probs_b.bias)
  };
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: row length first
  Fill fill = Fill::kWeights;
  // The share of the tensor one decoded token reads: 1, one row of an untied token_embd, or
  // the experts_used / experts routed experts.
  double read_share = 1.0;
};

// Sets general.architecture and every {arch}.* key of `shape` (for llama exactly what
// set_llama_hyperparameters sets).
void set_synth_hyperparameters(GgufWriter& writer, const SynthShape& shape);

// The tensors in the order they are written; shape.base.vocab must be set.
std::vector<SynthTensor> synth_tensors(const SynthShape& shape);

}  // namespace rapide
