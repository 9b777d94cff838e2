// GGUF metadata and tensors -> ModelFile (config, tokenizer data, tensor views).
#pragma once

#include <string>
#include <string_view>

#include "formats/gguf_reader.h"
#include "formats/model_file.h"

namespace rapide {

// Maps `{arch}.*` hyper-parameters (llama.cpp key names) into a ModelConfig. Throws
// kCorrupt for inconsistent values, kUnsupported for rope scaling other than linear or
// partial rotary embeddings.
ModelConfig config_from_gguf(const GgufFile& gguf);
// Maps `tokenizer.ggml.*` and `tokenizer.chat_template` into TokenizerData (kind kNone when
// the file has no vocabulary).
TokenizerData tokenizer_from_gguf(const GgufFile& gguf);
// The whole model; tensor views point into the GGUF's bytes, kept alive by gguf.owner().
ModelFile model_from_gguf(const GgufFile& gguf);
ModelFile load_gguf(const std::string& path);

// Rope layout llama.cpp uses for a GGUF architecture name: kNeox for qwen2, phi3, gemma,
// gptneox, ... and kNormal for llama and everything else.
RopeStyle rope_style_for_architecture(std::string_view architecture);

}  // namespace rapide
