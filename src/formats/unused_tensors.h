// The rule that a model file holds nothing rapide silently leaves out: once a Model has
// taken the tensors it computes with (ModelFile::get records them), every other tensor of
// the file must be on an explicit list of tensors known not to change the computation, or
// the file is refused with one line naming the tensor (kUnsupported), rather than run
// without it and give wrong logits (a Llama 3.1 file's rope_freqs.weight, a gemma2
// output.weight that the tied head would skip, an attention output bias).
//
// The list is data (kIgnoredTensors in unused_tensors.cpp, one commented row per tensor
// pattern and the architectures it applies to); docs/architectures.md gives every
// architecture's tensors, read or deliberately ignored, and why.
#pragma once

#include <string_view>

#include "formats/model_file.h"

namespace rapide {

// The part of a file one Model took: all of it, or a pipeline stage's layers (the file's
// blk.N. for N in [first_layer, first_layer + n_layers)) and, with `top_level`, the tensors
// outside blk.N. (embedding, final norm, head). Only the part taken is checked: another
// stage takes the rest (a pipeline of two or more stages therefore leaves the tensors
// outside blk.N. unchecked; a whole-model run checks them). Tensor-parallel ranks take every
// name (a slice of each).
struct TensorScope {
  int first_layer = 0;
  int n_layers = 0;
  bool top_level = true;
};

// Why `name`, a tensor of a `format` ("gguf", "hf", "llama2c") file of GGUF architecture
// `architecture`, may be left out of the computation; nullptr when it is not on the list.
// Patterns write a layer index as N: "model.layers.N.self_attn.rotary_emb.inv_freq". An
// entry for one of two alternatives (LongRoPE's factor sets) applies only when `used` shows
// the other was taken.
const char* ignored_tensor_reason(std::string_view format, std::string_view architecture,
                                  std::string_view name, const TensorUseLog* used = nullptr);

// Throws kUnsupported naming the first tensor in `scope` that was neither taken through
// file.get() nor on the list.
void refuse_unused_tensors(const ModelFile& file, const TensorScope& scope);

}  // namespace rapide
