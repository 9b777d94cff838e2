#include "serve/demo_model.h"

#include <fmt/format.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/llama_shape.h"

namespace rapide::serve {

namespace {

constexpr LlamaShape kDemoShape{
    .dim = 64, .layers = 2, .heads = 4, .kv_heads = 2, .ffn = 192, .ctx = 2048};

constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Words whose pieces (every prefix, with SentencePiece's U+2581 word marker) join the
// vocabulary, so ordinary English encodes to word-sized tokens.
constexpr const char* kWords[] = {
    "the",   "and",   "was",    "for",    "that", "with",   "they",   "have",   "this",   "from",
    "one",   "had",   "were",   "said",   "what", "there",  "when",   "your",   "can",    "each",
    "which", "she",   "how",    "their",  "will", "other",  "about",  "many",   "then",   "them",
    "would", "like",  "time",   "look",   "more", "day",    "could",  "come",   "people", "very",
    "upon",  "once",  "little", "girl",   "boy",  "happy",  "friend", "play",   "big",    "saw",
    "hello", "world", "model",  "random", "demo", "rapide", "token",  "server", "answer", "story"};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

Vocab demo_vocab() {
  Vocab v;
  auto add = [&](std::string text, float score, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, 2);  // unknown
  add("<s>", 0.0f, 3);    // control
  add("</s>", 0.0f, 3);
  add("<|im_start|>", 0.0f, 3);
  add("<|im_end|>", 0.0f, 3);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, 6);  // byte fallback
  const std::string marker = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  add(marker, -1.0f, 1);
  for (char c = 33; c < 127; ++c) add(std::string(1, c), -1.0f, 1);
  // Longer pieces score higher, so BPE merges prefix by prefix up to whole words.
  std::set<std::string> seen;
  for (const char* word : kWords) {
    const std::string w = marker + word;
    for (size_t len = marker.size() + 1; len <= w.size(); ++len) {
      const std::string piece = w.substr(0, len);
      if (seen.insert(piece).second) add(piece, static_cast<float>(len), 1);
    }
  }
  return v;
}

}  // namespace

ModelFile make_demo_model(uint64_t seed) {
  const Vocab vocab = demo_vocab();
  LlamaShape s = kDemoShape;
  s.vocab = static_cast<int64_t>(vocab.tokens.size());
  const int64_t n_vocab = s.vocab;
  const int head_dim = s.head_dim();

  GgufWriter w;
  set_llama_hyperparameters(w, s);
  w.set("general.name", GgufValue::string(kDemoModelId));
  w.set("general.file_type", GgufValue::u32(0));
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(vocab.tokens));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(vocab.scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(vocab.types));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  w.set("tokenizer.chat_template", GgufValue::string(kChatMlTemplate));

  std::mt19937_64 rng(seed);
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, float stddev) {
    std::normal_distribution<float> normal(0.0f, stddev);
    std::vector<float> values(static_cast<size_t>(cols * rows));
    for (float& x : values) x = normal(rng);
    w.add_tensor(name, TensorType::kF32, {cols, rows}, values.data(), values.size() * 4);
  };
  auto norm = [&](const std::string& name) {
    const std::vector<float> ones(static_cast<size_t>(s.dim), 1.0f);
    w.add_tensor(name, TensorType::kF32, {s.dim}, ones.data(), ones.size() * 4);
  };
  const int64_t kv_dim = static_cast<int64_t>(head_dim) * s.kv_heads;
  // Embeddings of unit scale so the residual stream is not dominated by noise layers.
  matrix("token_embd.weight", s.dim, n_vocab, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    norm(b + "attn_norm.weight");
    matrix(b + "attn_q.weight", s.dim, s.dim, 0.1f);
    matrix(b + "attn_k.weight", s.dim, kv_dim, 0.1f);
    matrix(b + "attn_v.weight", s.dim, kv_dim, 0.1f);
    matrix(b + "attn_output.weight", s.dim, s.dim, 0.1f);
    norm(b + "ffn_norm.weight");
    matrix(b + "ffn_gate.weight", s.dim, s.ffn, 0.1f);
    matrix(b + "ffn_up.weight", s.dim, s.ffn, 0.1f);
    matrix(b + "ffn_down.weight", s.ffn, s.dim, 0.1f);
  }
  norm("output_norm.weight");
  matrix("output.weight", s.dim, n_vocab, 0.3f);

  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  const GgufFile gguf = GgufFile::parse(bytes->data(), bytes->size(), kDemoModelId, bytes);
  ModelFile model = model_from_gguf(gguf);
  model.path = kDemoModelId;
  model.format = "demo (in-memory GGUF, random weights)";
  return model;
}

}  // namespace rapide::serve
