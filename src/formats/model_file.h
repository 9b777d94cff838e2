// A model as loaded from disk: config, tokenizer data and tensor views into memory the
// object keeps alive (a mapping of the file, or converted buffers). The three loaders
// (GGUF, llama2.c, Hugging Face) all produce this, so nothing downstream knows the format.
//
// Tensor names and shapes follow GGUF's llama conventions:
//   token_embd.weight [dim, vocab]     output_norm.weight [dim]     output.weight [dim, vocab]
//   blk.N.attn_norm.weight [dim]       blk.N.ffn_norm.weight [dim]
//   blk.N.attn_q.weight [dim, q_dim]   blk.N.attn_k.weight / attn_v.weight [dim, kv_dim]
//   blk.N.attn_output.weight [q_dim, dim]
//   blk.N.ffn_gate.weight / ffn_up.weight [dim, ffn]   blk.N.ffn_down.weight [ffn, dim]
//   blk.N.attn_q.bias / attn_k.bias / attn_v.bias (Qwen2)
// Shapes are in ggml order: shape[0] is the contiguous row length (a matrix's input width),
// shape[1] the number of rows (its output width). Q and K rows are in the order the rope
// style of the config expects (HF Llama checkpoints are permuted at load, as llama.cpp's
// converter does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/model_config.h"
#include "formats/tensor_type.h"
#include "formats/tensor_use_log.h"
#include "formats/tokenizer_data.h"

namespace rapide {

struct TensorView {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<int64_t> shape;  // ggml order, 1 to 4 dims
  const uint8_t* data = nullptr;
  size_t size_bytes = 0;

  int64_t element_count() const;
  int64_t rows() const;  // product of shape[1..]
  int64_t row_length() const { return shape.empty() ? 0 : shape[0]; }
};

struct ModelFile {
  std::string path;
  std::string format;  // "gguf", "llama2c", "hf"
  ModelConfig config;
  TokenizerData tokenizer;
  std::vector<TensorView> tensors;
  // Owners of the memory the views point into (file mappings, converted buffers).
  std::vector<std::shared_ptr<const void>> storage;
  TensorUseLog used;  // the names get() has handed out

  // find() only looks; get() takes the tensor for a computation and records it in `used`
  // (throws Error(kNotFound) when absent). A Model takes every tensor it computes with
  // through get(), and refuses the file if any other tensor is left (unused_tensors.h).
  const TensorView* find(const std::string& name) const;  // nullptr if absent
  const TensorView& get(const std::string& name) const;
  uint64_t total_tensor_bytes() const;
};

struct LoadOptions {
  // llama2.c checkpoints carry no vocabulary: path of the tokenizer.bin to use. Empty means
  // "tokenizer.bin" (then "tok<vocab>.bin") next to the checkpoint.
  std::string tokenizer_path;
};

// Detects the format (GGUF magic, llama2.c header, or a directory with config.json) and
// loads it. Throws Error with a message naming the file and what is wrong.
ModelFile load_model(const std::string& path, const LoadOptions& options = {});

}  // namespace rapide
