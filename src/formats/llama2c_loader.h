// llama2.c checkpoints (karpathy/llama2.c): the legacy format (a 7-int32 header, then f32
// weights) and the "v1" format (magic "ak42", version 1, 256-byte header, norms first),
// plus llama2.c's tokenizer.bin vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide {

constexpr uint32_t kLlama2cMagic = 0x616b3432;  // "ak42"

struct Llama2cHeader {
  int version = 0;  // 0 = legacy, 1 = v1
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;
  bool shared_classifier = true;
  size_t header_bytes = 0;
  int64_t expected_file_bytes = 0;  // header + weights, exactly
};

// Parses and checks a header (plausible sizes, heads dividing evenly). Throws kCorrupt when
// the bytes are not a llama2.c header, kUnsupported for other export versions.
Llama2cHeader parse_llama2c_header(const uint8_t* data, size_t size, const std::string& file);

// Loads a checkpoint; tensors are views into the file mapping, named as GGUF does
// (w1 = ffn_gate, w2 = ffn_down, w3 = ffn_up). The vocabulary comes from
// options.tokenizer_path, else tokenizer.bin or tok<vocab>.bin next to the checkpoint;
// without one the model loads with TokenizerKind::kNone.
ModelFile load_llama2c(const std::string& path, const LoadOptions& options);

// Reads a llama2.c tokenizer.bin of `vocab_size` tokens as SentencePiece data: spaces back
// to U+2581, "\n<s>\n" / "\n</s>\n" back to "<s>" / "</s>", <0xHH> tokens typed kByte.
TokenizerData read_llama2c_tokenizer(const std::string& path, int vocab_size);
TokenizerData parse_llama2c_tokenizer(const uint8_t* data, size_t size, const std::string& file,
                                      int vocab_size);

}  // namespace rapide
