#include "formats/llama_shape.h"

namespace rapide {

void set_llama_hyperparameters(GgufWriter& w, const LlamaShape& s) {
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("llama.context_length", GgufValue::u32(static_cast<uint32_t>(s.ctx)));
  w.set("llama.embedding_length", GgufValue::u32(static_cast<uint32_t>(s.dim)));
  w.set("llama.block_count", GgufValue::u32(static_cast<uint32_t>(s.layers)));
  w.set("llama.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.ffn)));
  w.set("llama.attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.heads)));
  w.set("llama.attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.kv_heads)));
  w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
  w.set("llama.rope.freq_base", GgufValue::f32(s.rope_base));
  w.set("llama.rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.head_dim())));
  w.set("llama.vocab_size", GgufValue::u32(static_cast<uint32_t>(s.vocab)));
}

}  // namespace rapide
