// One model, three files: TinyStories-656K as GGUF F16, Hugging Face F32 and HF BF16 must
// compute the same thing up to the precision each carries, and stories260K as GGUF and as
// llama2.c checkpoints (legacy and v1) exactly the same. The reference phi3, gemma2,
// llama-moe (Mixtral) and qwen2moe GGUFs, rewritten as Hugging Face folders (Hugging Face
// names, rotate-half Q/K rows, Gemma norms without their +1, one matrix per expert), compute
// the same logits bit for bit; a folder with a missing expert or an unknown architecture is
// refused with a one-line error naming it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "base/error.h"
#include "formats/gguf_writer.h"
#include "formats/model_checks.h"
#include "golden/greedy_runner.h"
#include "golden/llamacpp_reference.h"
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

// --- GGUF reference models rewritten as Hugging Face folders ---------------------------------
// Each folder undoes what load_hf (hf_loader.h) does on the way in, stated independently here:
// Hugging Face names, llama Q/K rows in rotate-half order, Gemma 2 norms without their +1,
// one matrix per expert, Qwen2-MoE's shared-expert gate as a [1, dim] matrix.

// One safetensors tensor: its Hugging Face name, shape outermost first, F32 bytes.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// A temporary folder, removed with the object.
struct TempFolder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("rapide-hf-{}", std::random_device{}());
  TempFolder() { std::filesystem::create_directories(path); }
  ~TempFolder() { std::filesystem::remove_all(path); }
};

// safetensors: an 8-byte header length, a JSON header, then the row-major data.
void write_safetensors(const std::filesystem::path& path, const std::vector<HfTensor>& tensors) {
  std::string header = "{";
  std::vector<uint8_t> body;
  for (const HfTensor& t : tensors) {
    header += fmt::format(R"({}"{}": {{"dtype": "F32", "shape": [{}], "data_offsets": [{}, {}]}})",
                          header.size() > 1 ? ", " : "", t.name, fmt::join(t.shape, ", "),
                          body.size(), body.size() + t.bytes.size());
    body.insert(body.end(), t.bytes.begin(), t.bytes.end());
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

// model.safetensors, config.json ({"architectures": [hf_arch], the common keys of `c`, then
// `extra_config`}) and a tokenizer.json. The vocabulary does not matter to the logits: a
// two-token BPE padded to the model's.
void write_hf_folder(const std::filesystem::path& dir, const std::vector<HfTensor>& tensors,
                     const std::string& hf_arch, const ModelConfig& c,
                     const std::string& extra_config) {
  write_safetensors(dir / "model.safetensors", tensors);
  std::ofstream(dir / "config.json") << fmt::format(
      R"({{"architectures": ["{}"], "hidden_size": {}, "intermediate_size": {},
          "num_hidden_layers": {}, "num_attention_heads": {}, "num_key_value_heads": {},
          "max_position_embeddings": {}, "rms_norm_eps": {}, "rope_theta": {},
          "vocab_size": {}{}}})",
      hf_arch, c.dim, c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.max_context, c.rms_eps,
      c.rope_theta, c.vocab_size, extra_config);
  std::ofstream(dir / "tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})";
}

// GGUF name -> Hugging Face name in a model of GGUF architecture `arch` (experts aside).
std::string hf_name(const std::string& gguf, const std::string& arch) {
  static const std::map<std::string, std::string> kTop = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  static const std::map<std::string, std::map<std::string, std::string>> kArch = {
      {"phi3", {{"ffn_up.weight", "mlp.gate_up_proj.weight"}}},
      {"gemma2",
       {{"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"}}},
      {"llama", {{"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"}}},
      {"qwen2moe",
       {{"ffn_gate_inp.weight", "mlp.gate.weight"},
        {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
        {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
        {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
        {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"}}}};
  if (auto it = kTop.find(gguf); it != kTop.end()) return it->second;
  const size_t dot = gguf.find('.', 4);  // "blk.N.rest"
  const std::string rest = gguf.substr(dot + 1);
  const auto& overrides = kArch.at(arch);
  auto it = overrides.find(rest);
  return "model.layers." + gguf.substr(4, dot - 4) + "." +
         (it != overrides.end() ? it->second : kLayer.at(rest));
}

// Hugging Face name of expert `e`'s matrix from the stacked ffn_{gate,up,down}_exps.
std::string hf_expert_name(const std::string& gguf, const std::string& arch, int e) {
  const size_t dot = gguf.find('.', 4);
  const std::string which = gguf.substr(dot + 1, gguf.find('_', dot + 5) - dot - 1);  // ffn_gate
  static const std::map<std::string, std::string> kMixtral = {
      {"ffn_gate", "w1"}, {"ffn_up", "w3"}, {"ffn_down", "w2"}};
  const std::string prefix = "model.layers." + gguf.substr(4, dot - 4);
  return arch == "llama"
             ? fmt::format("{}.block_sparse_moe.experts.{}.{}.weight", prefix, e,
                           kMixtral.at(which))
             : fmt::format("{}.mlp.experts.{}.{}_proj.weight", prefix, e, which.substr(4));
}

// The tensors of a Hugging Face checkpoint that converts to the GGUF file `f` (F32).
std::vector<HfTensor> hf_tensors_from_gguf(const ModelFile& f) {
  const ModelConfig& c = f.config;
  const std::string& arch = c.architecture;
  std::vector<HfTensor> out;
  for (const TensorView& t : f.tensors) {
    EXPECT_EQ(t.type, TensorType::kF32) << t.name;
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());
    std::vector<uint8_t> bytes(t.data, t.data + t.size_bytes);
    if (t.name.find("_exps.") != std::string::npos) {  // [n_experts][rows][cols]: split
      const size_t per_expert = t.size_bytes / shape[0];
      for (int e = 0; e < shape[0]; ++e) {
        const uint8_t* p = t.data + per_expert * e;
        out.push_back({hf_expert_name(t.name, arch, e), {shape[1], shape[2]}, {p, p + per_expert}});
      }
      continue;
    }
    const bool q = t.name.ends_with("attn_q.weight"), k = t.name.ends_with("attn_k.weight");
    if (arch == "llama" && (q || k)) {
      // Undo llama.cpp's permute: GGUF row (2 i + s) of each head was HF row (s * half + i).
      const int64_t heads = q ? c.n_heads : c.n_kv_heads, head_rows = shape[0] / heads;
      const size_t row = t.size_bytes / shape[0];
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < head_rows / 2; ++i) {
          for (int64_t s = 0; s < 2; ++s) {
            std::memcpy(&bytes[(h * head_rows + s * head_rows / 2 + i) * row],
                        t.data + (h * head_rows + 2 * i + s) * row, row);
          }
        }
      }
    }
    if (arch == "gemma2" && t.name.ends_with("norm.weight")) {
      // Gemma's RMSNorm multiplies by (1 + w); the converter stored 1 + w.
      for (size_t i = 0; i < bytes.size(); i += 4) {
        float v;
        std::memcpy(&v, &bytes[i], 4);
        v -= 1.0f;
        std::memcpy(&bytes[i], &v, 4);
      }
    }
    if (t.name.ends_with("ffn_gate_inp_shexp.weight"))
      shape.insert(shape.begin(), 1);  // Linear(dim, 1)
    out.push_back({hf_name(t.name, arch), shape, std::move(bytes)});
  }
  return out;
}

// The block description both files must give Model::forward.
void expect_same_block(const ModelConfig& h, const ModelConfig& g) {
  EXPECT_EQ(h.architecture, g.architecture);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.rope_style, g.rope_style);
  EXPECT_EQ(h.tied_embeddings, g.tied_embeddings);
  EXPECT_EQ(h.qkv_bias, g.qkv_bias);
  EXPECT_EQ(h.fused_qkv, g.fused_qkv);
  EXPECT_EQ(h.fused_gate_up, g.fused_gate_up);
  EXPECT_EQ(h.activation, g.activation);
  EXPECT_EQ(h.post_norms, g.post_norms);
  EXPECT_EQ(h.embedding_scale, g.embedding_scale);
  EXPECT_EQ(h.attn_softcap, g.attn_softcap);
  EXPECT_EQ(h.final_softcap, g.final_softcap);
  EXPECT_EQ(h.query_scale, g.query_scale);
  EXPECT_EQ(h.scale_query_first, g.scale_query_first);
  EXPECT_EQ(h.sliding_window, g.sliding_window);
  EXPECT_EQ(h.window_layers, g.window_layers);
  EXPECT_EQ(h.n_experts, g.n_experts);
  EXPECT_EQ(h.n_experts_used, g.n_experts_used);
  EXPECT_EQ(h.expert_ffn_dim, g.expert_ffn_dim);
  EXPECT_EQ(h.normalize_expert_weights, g.normalize_expert_weights);
  EXPECT_EQ(h.shared_expert_ffn_dim, g.shared_expert_ffn_dim);
}

// 40 tokens: past Gemma 2's 32-token window, so its even layers mask.
std::vector<int32_t> long_prompt() {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(3 + (37 * i + 11) % 509);
  return p;
}

// Loads the reference GGUF `file` and its Hugging Face rewrite and expects the same logits at
// every position, bit for bit (returns the HF model for further checks).
LoadedForTest expect_gguf_and_hf_folder_agree(const std::string& file, const std::string& hf_arch,
                                              const std::string& extra_config,
                                              const std::vector<int32_t>& prompt) {
  LoadedForTest gguf = load_for_test(shared_path(file));
  TempFolder dir;
  write_hf_folder(dir.path, hf_tensors_from_gguf(*gguf.file), hf_arch, gguf.model->config(),
                  extra_config);
  LoadedForTest hf = load_for_test(dir.path.string());
  expect_same_block(hf.model->config(), gguf.model->config());
  ThreadPool pool(2);
  EXPECT_EQ(first_logits(gguf, prompt, pool), first_logits(hf, prompt, pool));
  return hf;
}

TEST(ModelFormatsAgree, Phi3GgufVsHfFolder) {
  const std::string file = "reference/llamacpp/models/phi3-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  const LoadedForTest hf = expect_gguf_and_hf_folder_agree(
      file, "Phi3ForCausalLM", R"(, "sliding_window": 2047, "tie_word_embeddings": false)",
      {1, 403, 407, 261, 378, 10, 77, 300, 12, 5});
  const ModelConfig& h = hf.model->config();
  EXPECT_EQ(h.architecture, "phi3");
  EXPECT_TRUE(h.fused_qkv && h.fused_gate_up && h.scale_query_first);
  EXPECT_EQ(h.sliding_window, 2047);
  EXPECT_EQ(h.rope_style, RopeStyle::kNeox);
}

// llama.cpp's converter writes Qwen1.5-MoE's [1, dim] shared-expert gate as GGUF {dim, 1},
// which llama.cpp reads as {dim}: trailing dimensions of 1 are accepted, others are not.
TEST(ModelFormatsAgree, TrailingDimensionsOfOneAreTheSameShape) {
  const std::string file = "reference/llamacpp/models/qwen2moe-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  ModelFile m = load_model(shared_path(file));
  auto gate = std::find_if(m.tensors.begin(), m.tensors.end(), [](const TensorView& t) {
    return t.name == "blk.0.ffn_gate_inp_shexp.weight";
  });
  ASSERT_NE(gate, m.tensors.end());
  const int64_t dim = m.config.dim;
  gate->shape = {dim, 1};
  EXPECT_NO_THROW(check_model(m));
  gate->shape = {1, dim};
  EXPECT_THROW(check_model(m), Error);
}

// Norms go in as w - 1 and load as (w - 1) + 1: exact for the reference's weights, all in
// [0.5, 2] (1 + N(0, 0.1^2)), where Sterbenz makes both operations exact.
TEST(ModelFormatsAgree, Gemma2GgufVsHfFolder) {
  const std::string file = "reference/llamacpp/models/gemma2-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  // query_pre_attn_scalar: the head size, which llama.cpp derives for a 26-layer gemma2.
  const LoadedForTest hf = expect_gguf_and_hf_folder_agree(
      file, "Gemma2ForCausalLM",
      R"(, "head_dim": 32, "query_pre_attn_scalar": 32, "attn_logit_softcapping": 20.0,
          "final_logit_softcapping": 10.0, "sliding_window": 32,
          "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": true)",
      long_prompt());
  const ModelConfig& h = hf.model->config();
  EXPECT_EQ(h.architecture, "gemma2");
  EXPECT_EQ(h.attn_softcap, 20.0f);
  EXPECT_EQ(h.final_softcap, 10.0f);
  EXPECT_EQ(h.sliding_window, 32);
  EXPECT_EQ(h.window_layers, WindowLayers::kPattern);
  EXPECT_EQ(h.window_period, 2);
  EXPECT_EQ(h.embedding_scale, std::sqrt(32.0f));
  EXPECT_TRUE(h.post_norms && h.tied_embeddings);
  EXPECT_EQ(h.rope_style, RopeStyle::kNeox);
}

TEST(ModelFormatsAgree, MixtralGgufVsHfFolder) {
  const std::string file = "reference/llamacpp/models/llama-moe-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  const LoadedForTest hf = expect_gguf_and_hf_folder_agree(
      file, "MixtralForCausalLM",
      R"(, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null)",
      long_prompt());
  const ModelConfig& h = hf.model->config();
  EXPECT_EQ(h.architecture, "llama");
  EXPECT_EQ(h.n_experts, 4);
  EXPECT_EQ(h.n_experts_used, 2);
  EXPECT_EQ(h.expert_ffn_dim, 64);
  EXPECT_TRUE(h.normalize_expert_weights);
  EXPECT_EQ(h.rope_style, RopeStyle::kNormal);
}

TEST(ModelFormatsAgree, Qwen2MoeGgufVsHfFolder) {
  const std::string file = "reference/llamacpp/models/qwen2moe-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  const LoadedForTest hf = expect_gguf_and_hf_folder_agree(
      file, "Qwen2MoeForCausalLM",
      R"(, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
          "shared_expert_intermediate_size": 128, "norm_topk_prob": false,
          "decoder_sparse_step": 1, "mlp_only_layers": [])",
      long_prompt());
  const ModelConfig& h = hf.model->config();
  EXPECT_EQ(h.architecture, "qwen2moe");
  EXPECT_EQ(h.n_experts, 4);
  EXPECT_EQ(h.n_experts_used, 2);
  EXPECT_EQ(h.expert_ffn_dim, 64);
  EXPECT_EQ(h.shared_expert_ffn_dim, 128);
  EXPECT_FALSE(h.normalize_expert_weights);
  EXPECT_TRUE(h.qkv_bias);
  EXPECT_EQ(h.rope_style, RopeStyle::kNeox);
}

// The message of the Error loading `dir` throws (with its code), "" if it loads.
std::string load_error(const std::filesystem::path& dir, ErrorCode code) {
  try {
    load_for_test(dir.string());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  return "";
}

TEST(ModelFormatsAgree, HfFolderWithAMissingExpertOrUnknownArchitectureIsRefused) {
  const std::string file = "reference/llamacpp/models/llama-moe-F32.gguf";
  RAPIDE_REQUIRE_SHARED(file);
  const ModelFile gguf = load_model(shared_path(file));
  std::vector<HfTensor> tensors = hf_tensors_from_gguf(gguf);
  const std::string missing = "model.layers.1.block_sparse_moe.experts.2.w2.weight";
  std::erase_if(tensors, [&](const HfTensor& t) { return t.name == missing; });
  const std::string moe = R"(, "num_local_experts": 4, "num_experts_per_tok": 2)";
  {
    TempFolder dir;
    write_hf_folder(dir.path, tensors, "MixtralForCausalLM", gguf.config, moe);
    const std::string message = load_error(dir.path, ErrorCode::kCorrupt);
    EXPECT_NE(message.find("missing tensor '" + missing + "'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  {
    TempFolder dir;
    write_hf_folder(dir.path, tensors, "FalconForCausalLM", gguf.config, moe);
    const std::string message = load_error(dir.path, ErrorCode::kUnsupported);
    EXPECT_NE(message.find("architecture 'FalconForCausalLM' is not supported"), std::string::npos)
        << message;
    EXPECT_NE(message.find("MixtralForCausalLM"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace rapide::testing

namespace rapide::testing {
namespace {

// The GGUF a converter would write for a loaded Hugging Face folder: its tensors (already
// under GGUF names, in GGUF order, Gemma norms with their +1) and the `arch.*` keys of the
// block description. Only what the loader reads for these architectures is written.
GgufWriter gguf_of(const ModelFile& m, const std::string& arch,
                   const std::function<bool(const std::string&)>& skip = {}) {
  const ModelConfig& c = m.config;
  GgufWriter w;
  const std::string p = arch + ".";
  w.set("general.architecture", GgufValue::string(arch));
  w.set(p + "context_length", GgufValue::u32(c.max_context));
  w.set(p + "embedding_length", GgufValue::u32(c.dim));
  w.set(p + "block_count", GgufValue::u32(c.n_layers));
  w.set(p + "feed_forward_length", GgufValue::u32(c.ffn_dim));
  w.set(p + "attention.head_count", GgufValue::u32(c.n_heads));
  w.set(p + "attention.head_count_kv", GgufValue::u32(c.n_kv_heads));
  w.set(p + "attention.key_length", GgufValue::u32(c.head_dim));
  w.set(p + "attention.value_length", GgufValue::u32(c.head_dim));
  w.set(p + "rope.freq_base", GgufValue::f32(c.rope_theta));
  w.set(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_eps));
  w.set(p + "vocab_size", GgufValue::u32(c.vocab_size));
  if (c.rope_scaling == RopeScaling::kLinear) {
    w.set(p + "rope.scaling.type", GgufValue::string("linear"));
    w.set(p + "rope.scaling.factor", GgufValue::f32(c.rope_scale));
  }
  if (c.sliding_window > 0) w.set(p + "attention.sliding_window", GgufValue::u32(c.sliding_window));
  for (const TensorView& t : m.tensors) {
    if (skip && skip(t.name)) continue;
    w.add_tensor(t.name, t.type, t.shape, t.data, t.size_bytes);
  }
  return w;
}

std::vector<float> every_logit(LoadedForTest& t, const std::vector<int32_t>& tokens,
                               ThreadPool& pool) {
  ContiguousKvStore kv(t.model->config(), 1, static_cast<int>(tokens.size()));
  Batch batch;
  for (size_t p = 0; p < tokens.size(); ++p) batch.add(tokens[p], 0, static_cast<int>(p), true);
  auto logits = t.model->forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

// story64 of shared/reference/llamacpp2/tokens.txt (crosses gemma3's 16-position window).
std::vector<int32_t> story64() {
  return read_reference_sequences(shared_path("reference/llamacpp2/tokens.txt")).at(0).tokens;
}

// Qwen3's folder (checked against the float64 transcription in llamacpp2_logits_test) as a
// qwen3 GGUF, and as a qwen3moe GGUF whose every layer has one expert (routed with weight 1
// after renormalisation): the same logits bit for bit, so the GGUF paths of both
// architectures compute what the reference-checked folder does.
TEST(ModelFormatsAgree, Qwen3FolderAsQwen3AndQwen3MoeGguf) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp2/hf/qwen3");
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = story64();
  LoadedForTest hf = load_for_test(shared_path("reference/llamacpp2/hf/qwen3"));
  const std::vector<float> want = every_logit(hf, tokens, pool);
  TempFolder dir;
  {
    const std::string path = (dir.path / "qwen3.gguf").string();
    gguf_of(*hf.file, "qwen3").write(path);
    LoadedForTest g = load_for_test(path);
    EXPECT_EQ(g.model->config().qk_norm, QkNorm::kPerHead);
    const std::vector<float> got = every_logit(g, tokens, pool);
    ASSERT_EQ(got, want) << "qwen3 GGUF";
  }
  {
    const ModelConfig& c = hf.file->config;
    const auto dense_ffn = [](const std::string& name) {
      return name.ends_with(".ffn_gate.weight") || name.ends_with(".ffn_up.weight") ||
             name.ends_with(".ffn_down.weight");
    };
    GgufWriter w = gguf_of(*hf.file, "qwen3moe", dense_ffn);
    // Each dense FFN becomes expert 0 of 1, with a router of one row.
    for (const TensorView& t : hf.file->tensors) {
      if (!dense_ffn(t.name)) continue;
      const std::string stacked = t.name.substr(0, t.name.rfind(".weight")) + "_exps.weight";
      std::vector<int64_t> shape = t.shape;
      shape.push_back(1);
      w.add_tensor(stacked, t.type, shape, t.data, t.size_bytes);
    }
    std::vector<float> router(static_cast<size_t>(c.dim), 0.0f);
    for (int l = 0; l < c.n_layers; ++l) {
      w.add_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l), TensorType::kF32, {c.dim, 1},
                   router.data(), router.size() * sizeof(float));
    }
    w.set("qwen3moe.expert_count", GgufValue::u32(1));
    w.set("qwen3moe.expert_used_count", GgufValue::u32(1));
    w.set("qwen3moe.expert_feed_forward_length", GgufValue::u32(c.ffn_dim));
    const std::string path = (dir.path / "qwen3moe.gguf").string();
    w.write(path);
    LoadedForTest g = load_for_test(path);
    EXPECT_EQ(g.model->config().n_experts, 1);
    const std::vector<float> got = every_logit(g, tokens, pool);
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    // The expert path sums the (single) expert's output times its weight 1.0: exact.
    EXPECT_EQ(worst, 0.0f) << "qwen3moe GGUF with one expert";
  }
}

// Gemma 3's folder as a gemma3 GGUF. llama.cpp's GGUF has no query_pre_attn_scalar (it uses
// the head size, architecture.cpp), so the folder is loaded with query_pre_attn_scalar set to
// its head size: then the GGUF path's fixed facts (period 6, local base 1e4 unscaled, global
// linear scaling, per-head q/k norms, sandwich norms) must give the folder's logits bit for
// bit.
TEST(ModelFormatsAgree, Gemma3FolderAsGemma3Gguf) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp2/hf/gemma3");
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = story64();
  TempFolder dir;
  const std::filesystem::path folder = dir.path / "gemma3";
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(shared_path("reference/llamacpp2/hf/gemma3/model.safetensors"),
                             folder / "model.safetensors");
  nlohmann::json config = nlohmann::json::parse(
      std::ifstream(shared_path("reference/llamacpp2/hf/gemma3/config.json")));
  config["query_pre_attn_scalar"] = config["head_dim"];
  std::ofstream(folder / "config.json") << config.dump();
  LoadedForTest hf = load_for_test(folder.string());
  const std::vector<float> want = every_logit(hf, tokens, pool);
  const std::string path = (dir.path / "gemma3.gguf").string();
  gguf_of(*hf.file, "gemma3").write(path);
  LoadedForTest g = load_for_test(path);
  EXPECT_EQ(g.model->config().window_period, 6);
  EXPECT_EQ(g.model->config().rope_theta_local, 10000.0f);
  const std::vector<float> got = every_logit(g, tokens, pool);
  ASSERT_EQ(got, want) << "gemma3 GGUF";
}

}  // namespace
}  // namespace rapide::testing
