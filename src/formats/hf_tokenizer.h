// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerData, producing what
// llama.cpp's convert_hf_to_gguf.py writes for the same folder, so a model behaves the same
// whether loaded from its HF folder or from a GGUF converted from it:
//   * BPE with byte_fallback (Llama/Mistral/TinyLlama style, "▁" for space) -> kSentencePiece,
//     tokens by id, every score -1000 (llama.cpp's LlamaHfVocab: it does not turn merges
//     into scores), types: special added tokens kControl, other added tokens kUserDefined,
//     <0xHH> kByte, the rest kNormal; pre "default".
//   * BPE with a ByteLevel pre-tokenizer (GPT-2, Llama 3, Qwen2) -> kByteLevelBpe with the
//     merges, pre guessed from the pre-tokenizer (see guess_pre: "llama3", "qwen2",
//     "deepseek-coder", ...).
//   * added_tokens lstrip/rstrip become TokenizerData::strip.
//   * ids missing below the model's vocabulary size become "[PAD<id>]" tokens (kUnused).
#pragma once

#include <string>

#include "formats/tokenizer_data.h"

namespace rapide {

struct HfTokenizerInputs {
  std::string tokenizer_json;         // contents of tokenizer.json
  std::string tokenizer_config_json;  // contents of tokenizer_config.json, may be empty
  std::string chat_template_file;     // contents of chat_template.jinja, may be empty
  int vocab_size = 0;                 // config.json vocab_size (tokens are padded up to it)
  int config_bos_id = -1;             // config.json bos/eos ids, used when the tokenizer
  int config_eos_id = -1;             // config does not name the tokens
  std::string model_type;             // config.json model_type ("llama", "qwen2")
};

// `name` names the folder in errors. kCorrupt for malformed JSON and for fields that are not
// what they claim (a vocabulary that is empty or shares ids, model.merges that is not a list of
// "a b" strings or [a, b] pairs, in either kind); kUnsupported for tokenizer models other
// than BPE.
TokenizerData parse_hf_tokenizer(const HfTokenizerInputs& in, const std::string& name);

}  // namespace rapide
