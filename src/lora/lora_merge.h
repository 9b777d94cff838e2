// `rapide lora merge`: a base model GGUF with one adapter folded into its matrices, for users
// who serve a single fine-tune (one model to load, no low-rank products per step), as
// llama.cpp's llama-export-lora makes it.
//
// Every adapted matrix becomes W + scale * (B A), computed in F32 (each element of B A a sum
// over the rank in order, then times the pair's scale, then added to W), and stored in the
// base tensor's type when that is F32, F16 or BF16, as F16 otherwise (llama-export-lora's rule
// for quantized bases: requantizing would add the quantization error to the fine-tune).
// Every other tensor and every metadata key is copied as it is.
#pragma once

#include <cstdint>
#include <string>

#include "lora/lora_load.h"

namespace rapide {

struct LoraMergeReport {
  int merged = 0;         // matrices that received an update
  int converted_f16 = 0;  // of those, quantized base matrices written as F16
  uint64_t bytes = 0;     // tensor data written
};

// Reads the adapter of `spec` (its scale applies) for the GGUF `base_path` and writes the
// merged model to `out_path` (through a temporary file renamed at the end). Throws what
// load_model / load_lora throw, kInvalidArgument when the base is not a GGUF file or
// `out_path` is the base itself.
LoraMergeReport merge_lora(const std::string& base_path, const LoraSpec& spec,
                           const std::string& out_path);

}  // namespace rapide
