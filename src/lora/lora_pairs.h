// What the two adapter readers (lora_gguf.cpp, lora_peft.cpp) share once they have found a
// pair of A / B tensors in GGUF orientation: the checks against the base model and the
// preparation of the pair (lora/lora_load.h states the rules).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "formats/model_file.h"
#include "lora/lora_adapter.h"
#include "lora/lora_load.h"

namespace rapide {

struct LoraPairInfo {
  std::string base_name;  // the adapted base tensor, "blk.N.attn_q.weight"
  float alpha = 0.0f;     // 0: no alpha (the scale is the user's alone)
  bool rslora = false;    // alpha / sqrt(rank)
  int64_t rank = 0;       // the rank the adapter declares (PEFT's r); 0: any
};

// Checks the pair against the base (ggml shapes: a [in, rank], b [rank, out], the base
// tensor [in, out]), prepares it and sets it in `adapter`. Throws as lora_load.h says.
void add_lora_pair(LoraAdapter& adapter, const ModelFile& base, const LoraPairInfo& info,
                   const TensorView& a, const TensorView& b);

// The two readers.
std::shared_ptr<const LoraAdapter> load_lora_gguf(const LoraSpec& spec, const ModelFile& base);
std::shared_ptr<const LoraAdapter> load_lora_peft(const LoraSpec& spec, const ModelFile& base);

}  // namespace rapide
