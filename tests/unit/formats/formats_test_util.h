// Helpers shared by the formats tests: error expectations, temporary folders, tensor
// conversion to f32 and a tiny valid GGUF to corrupt.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "formats/gguf_writer.h"
#include "formats/model_file.h"

namespace rapide::testing {

// Runs fn and checks it throws rapide::Error with `code` and a message containing `part`.
inline void expect_error(const std::function<void()>& fn, ErrorCode code, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(code))) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message '" << e.what() << "' lacks '" << part << "'";
  }
}

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("rapide_formats_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}
inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file(path, bytes.data(), bytes.size());
}
inline void write_file(const std::string& path, const std::string& text) {
  write_file(path, text.data(), text.size());
}

// A float tensor (F32/F16/BF16) as f32 values.
inline std::vector<float> to_f32(const TensorView& t) {
  const int64_t n = t.element_count();
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    switch (t.type) {
      case TensorType::kF32:
        std::memcpy(&out[i], t.data + 4 * i, 4);
        break;
      case TensorType::kF16:
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = fp16_to_fp32(h);
        break;
      case TensorType::kBF16:
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = bf16_to_fp32(h);
        break;
      default:
        ADD_FAILURE() << "to_f32 of " << t.name;
        return out;
    }
  }
  return out;
}

// A small valid llama GGUF (dim 32, 1 layer, 2 heads, vocab 4): vectors and the embedding
// F32, matrices Q4_0, blk.0.ffn_up Q8_0, so tests can corrupt real structure.
inline GgufWriter tiny_llama_writer() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("general.name", GgufValue::string("tiny"));
  w.set("llama.embedding_length", GgufValue::u32(32));
  w.set("llama.block_count", GgufValue::u32(1));
  w.set("llama.attention.head_count", GgufValue::u32(2));
  w.set("llama.attention.head_count_kv", GgufValue::u32(1));
  w.set("llama.feed_forward_length", GgufValue::u32(32));
  w.set("llama.context_length", GgufValue::u32(64));
  w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f));
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array({"<unk>", "<s>", "</s>",
                                                          "\xe2\x96\x81"
                                                          "a"}));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0, 0, -1}));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 1}));
  auto f32 = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(i % 97);
    w.add_tensor(name, TensorType::kF32, shape, v.data(), v.size() * 4);
  };
  // Matrices in Q4_0 keep the file (and the committed corpus made from it) small.
  auto q4 = [&](const std::string& name, std::vector<int64_t> shape) {
    std::vector<BlockQ4_0> blocks(static_cast<size_t>(shape[0] * shape[1] / kQuantBlock));
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i].d = fp32_to_fp16(0.25f);
      for (int j = 0; j < kQuantBlock / 2; ++j) blocks[i].qs[j] = static_cast<uint8_t>(i + j);
    }
    w.add_tensor(name, TensorType::kQ4_0, shape, blocks.data(), blocks.size() * 18);
  };
  f32("token_embd.weight", {32, 4});
  f32("output_norm.weight", {32});
  f32("blk.0.attn_norm.weight", {32});
  q4("blk.0.attn_q.weight", {32, 32});
  q4("blk.0.attn_k.weight", {32, 16});
  q4("blk.0.attn_v.weight", {32, 16});
  q4("blk.0.attn_output.weight", {32, 32});
  f32("blk.0.ffn_norm.weight", {32});
  q4("blk.0.ffn_gate.weight", {32, 32});
  q4("blk.0.ffn_down.weight", {32, 32});
  std::vector<BlockQ8_0> q8(32);
  for (size_t i = 0; i < q8.size(); ++i) {
    q8[i].d = fp32_to_fp16(0.5f);
    for (int j = 0; j < kQuantBlock; ++j) q8[i].qs[j] = static_cast<int8_t>(j - 16);
  }
  w.add_tensor("blk.0.ffn_up.weight", TensorType::kQ8_0, {32, 32}, q8.data(), q8.size() * 34);
  return w;
}

}  // namespace rapide::testing
