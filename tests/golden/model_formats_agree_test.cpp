// One model, three files: TinyStories-656K as GGUF F16, Hugging Face F32 and HF BF16 must
// compute the same thing up to the precision each carries, and stories260K as GGUF and as
// llama2.c checkpoints (legacy and v1) exactly the same. The reference phi3 GGUF, rewritten
// as a Hugging Face folder (qkv_proj and gate_up_proj), computes the same logits bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::vector<float> first_logits(LoadedForTest& t, const std::vector<int32_t>& prompt,
                                ThreadPool& pool) {
  ContiguousKvStore kv(t.model->config(), 1, 64);
  Batch batch;
  for (size_t p = 0; p < prompt.size(); ++p) batch.add(prompt[p], 0, static_cast<int>(p), true);
  auto logits = t.model->forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Greedy runs agree until the first step where one of them is a near-tie.
void expect_same_until_near_tie(const GreedyResult& a, const GreedyResult& b, float max_margin,
                                const char* what) {
  for (size_t i = 0; i < a.tokens.size() && i < b.tokens.size(); ++i) {
    if (a.tokens[i] == b.tokens[i]) continue;
    EXPECT_LT(std::min(a.steps[i].margin, b.steps[i].margin), max_margin)
        << what << ": token " << i << " differs without a near-tie";
    return;
  }
}

TEST(ModelFormatsAgree, TinyStoriesGgufF16VsHfF32VsHfBf16) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  ThreadPool pool(2);
  auto gguf = load_for_test(shared_path("models/tinystories-656k/TinyStories-656K-F16.gguf"));
  auto hf32 = load_for_test(shared_path("models/tinystories-656k/hf"));
  auto hf16 = load_for_test(shared_path("models/tinystories-656k/hf-bf16"));
  const auto prompt = gguf.tokenizer->encode("Once upon a time, there was a", true);
  EXPECT_EQ(prompt, hf32.tokenizer->encode("Once upon a time, there was a", true));
  EXPECT_EQ(prompt, hf16.tokenizer->encode("Once upon a time, there was a", true));

  const auto l16 = first_logits(gguf, prompt, pool);
  const auto l32 = first_logits(hf32, prompt, pool);
  const auto lbf = first_logits(hf16, prompt, pool);
  // F16 weights and activations vs F32: logits agree to a few hundredths; BF16 carries
  // 8 bits of mantissa, so an order of magnitude looser.
  EXPECT_LT(max_abs_diff(l16, l32), 0.05f);
  EXPECT_LT(max_abs_diff(lbf, l32), 0.5f);

  auto g16 = greedy(*gguf.model, prompt, 64, pool);
  auto g32 = greedy(*hf32.model, prompt, 64, pool);
  auto gbf = greedy(*hf16.model, prompt, 64, pool);
  expect_same_until_near_tie(g16, g32, 0.1f, "GGUF F16 vs HF F32");
  expect_same_until_near_tie(gbf, g32, 0.5f, "HF BF16 vs HF F32");
}

TEST(ModelFormatsAgree, Stories260KGgufVsLlama2cLegacyVsV1) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  ThreadPool pool(2);
  LoadOptions tok;
  tok.tokenizer_path = shared_path("models/stories260K/tok512.bin");
  auto gguf = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  auto legacy = load_for_test(shared_path("models/stories260K/stories260K.bin"), tok);
  auto v1 = load_for_test(shared_path("models/stories260K/stories260K-v1.bin"), tok);
  const auto prompt = gguf.tokenizer->encode("Once upon a time", true);
  ASSERT_EQ(prompt, legacy.tokenizer->encode("Once upon a time", true));
  const auto a = greedy(*gguf.model, prompt, 100, pool);
  EXPECT_EQ(a.tokens, greedy(*legacy.model, prompt, 100, pool).tokens);
  EXPECT_EQ(a.tokens, greedy(*v1.model, prompt, 100, pool).tokens);
}

// GGUF name -> Hugging Face name for a Phi-3 checkpoint.
std::string hf_name_for_phi3(const std::string& gguf) {
  static const std::map<std::string, std::string> kTop = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_up.weight", "mlp.gate_up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (auto it = kTop.find(gguf); it != kTop.end()) return it->second;
  const size_t dot = gguf.find('.', 4);  // "blk.N.rest"
  return "model.layers." + gguf.substr(4, dot - 4) + "." + kLayer.at(gguf.substr(dot + 1));
}

TEST(ModelFormatsAgree, Phi3GgufVsHfFolder) {
  const std::string gguf_path = "reference/llamacpp/models/phi3-F32.gguf";
  RAPIDE_REQUIRE_SHARED(gguf_path);
  LoadedForTest gguf = load_for_test(shared_path(gguf_path));
  const ModelConfig& c = gguf.model->config();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("rapide-phi3-hf-{}", std::random_device{}());
  std::filesystem::create_directories(dir);
  // safetensors: an 8-byte header length, a JSON header, then the row-major data (the same
  // bytes as GGUF's, with the shape written outermost first).
  std::string header = "{";
  std::vector<char> body;
  for (const TensorView& t : gguf.file->tensors) {
    const std::string shape = t.shape.size() == 1 ? fmt::format("[{}]", t.shape[0])
                                                  : fmt::format("[{}, {}]", t.shape[1], t.shape[0]);
    header += fmt::format(
        "{}\"{}\": {{\"dtype\": \"F32\", \"shape\": {}, \"data_offsets\": "
        "[{}, {}]}}",
        header.size() > 1 ? ", " : "", hf_name_for_phi3(t.name), shape, body.size(),
        body.size() + t.size_bytes);
    body.insert(body.end(), t.data, t.data + t.size_bytes);
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
  }
  std::ofstream(dir / "config.json") << fmt::format(
      R"({{"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": {},
          "intermediate_size": {}, "num_hidden_layers": {}, "num_attention_heads": {},
          "num_key_value_heads": {}, "max_position_embeddings": {}, "rms_norm_eps": {},
          "rope_theta": {}, "sliding_window": {}, "vocab_size": {},
          "tie_word_embeddings": false}})",
      c.dim, c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.max_context, c.rms_eps, c.rope_theta,
      c.sliding_window, c.vocab_size);
  // The vocabulary does not matter to the logits: a two-token BPE padded to the model's.
  std::ofstream(dir / "tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})";

  LoadedForTest hf = load_for_test(dir.string());
  const ModelConfig& h = hf.model->config();
  EXPECT_EQ(h.architecture, "phi3");
  EXPECT_TRUE(h.fused_qkv && h.fused_gate_up && h.scale_query_first);
  EXPECT_EQ(h.sliding_window, 2047);
  EXPECT_EQ(h.rope_style, RopeStyle::kNeox);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 10, 77, 300, 12, 5};
  EXPECT_EQ(first_logits(gguf, prompt, pool), first_logits(hf, prompt, pool));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rapide::testing
