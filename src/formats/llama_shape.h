// The hyper-parameters of a Llama-family decoder as GGUF stores them under "llama.*": what
// `rapide synth` and the built-in demo model write for the models they generate.
#pragma once

#include <cstdint>
#include <string>

#include "formats/gguf_writer.h"

namespace rapide {

struct LlamaShape {
  int dim = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int ffn = 0;
  int ctx = 0;
  int64_t vocab = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;

  int head_dim() const { return dim / heads; }
};

// "dim=768,layers=12,heads=12,kv_heads=4,ffn=2048,ctx=2048": keys missing from the list keep
// the values of `defaults`. Throws kInvalidArgument (naming `option`) for an unknown key, a
// value that is not a positive integer, or heads that do not divide dim into even head sizes
// or are not a multiple of kv_heads.
LlamaShape parse_llama_shape(const std::string& text, LlamaShape defaults,
                             const std::string& option);

// Sets general.architecture = "llama" and every llama.* key of `shape`.
void set_llama_hyperparameters(GgufWriter& writer, const LlamaShape& shape);

}  // namespace rapide
