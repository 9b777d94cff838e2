// Reading LoRA adapters for a base model, in either form they are published in:
//   * llama.cpp's LoRA GGUF (what its convert_lora_to_gguf.py writes): general.type =
//     "adapter", adapter.type = "lora", adapter.lora.alpha, general.architecture = the base's,
//     and tensor pairs blk.N.<target>.weight.lora_a (ggml shape [in, rank]) / .lora_b
//     ([rank, out]);
//   * a Hugging Face PEFT folder: adapter_config.json (peft_type LORA, r, lora_alpha,
//     target_modules, use_rslora) and adapter_model.safetensors with
//     base_model.model.model.layers.N.<module>.lora_A.weight ([r, in_features]) and
//     .lora_B.weight ([out_features, r]). Hugging Face names map to GGUF ones as the model
//     loader maps them (formats/hf_loader.h), and lora_B of Llama's q_proj / k_proj gets the
//     converter's Q/K row permutation, as convert_lora_to_gguf.py applies it: a folder and its
//     GGUF conversion compute the same thing.
// Scale: lora_scale (lora/lora_adapter.h) of the spec's scale, alpha and each pair's rank.
//
// Everything is checked against the base before anything runs, and what rapide does not run
// is refused by name (Error kUnsupported): DoRA, rank or alpha patterns, LoRA biases, extra
// trained modules (modules_to_save), embedding / output-head adapters, norm tensors, fused
// projections, targets outside lora_target_names(), quantized adapter tensors. A file that is
// not an adapter, an adapter for another architecture, or a pair whose shapes do not fit the
// base's matrix is kInvalidArgument; a malformed file kCorrupt; a missing one kNotFound.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "formats/model_file.h"
#include "lora/lora_adapter.h"

namespace rapide {

struct LoraSpec {
  std::string name;  // how requests and flags name the adapter
  std::string path;  // a .gguf file or a PEFT folder
  float scale = 1.0f;
};

// "NAME=PATH[:SCALE]", or "PATH[:SCALE]" with the name taken from the file's or folder's stem.
// A ':' whose remainder is not a number belongs to the path. NAME: letters, digits, '.', '_',
// '-'. Throws Error(kInvalidArgument) naming what is wrong.
LoraSpec parse_lora_spec(std::string_view text);

// A directory is read as a PEFT folder, anything else as a LoRA GGUF.
std::shared_ptr<const LoraAdapter> load_lora(const LoraSpec& spec, const ModelFile& base);

}  // namespace rapide
