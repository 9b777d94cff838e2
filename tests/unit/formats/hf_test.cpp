// Hugging Face folders: TinyStories-656K's HF export equals its GGUF conversion (config,
// every tensor within F16 rounding after the Llama Q/K permutation, tokenizer data); a
// synthetic Qwen2 folder covers byte-level BPE, biases, NeoX rope and shards.
#include "formats/hf_loader.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

#include "base/mapped_file.h"
#include "formats/hf_tokenizer.h"
#include "formats/safetensors_reader.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::shared_path;

const std::string kHf = "models/tinystories-656k/hf";

TEST(HfLoader, TinyStoriesHfEqualsItsGgufConversion) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  const ModelFile hf = load_model(shared_path(kHf));
  const ModelFile gguf =
      load_model(shared_path("models/tinystories-656k/TinyStories-656K-F16.gguf"));
  EXPECT_EQ(hf.format, "hf");
  const ModelConfig &a = hf.config, &b = gguf.config;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn_dim, b.ffn_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_context, b.max_context);
  EXPECT_EQ(a.rms_eps, b.rms_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scale, b.rope_scale);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  ASSERT_EQ(hf.tensors.size(), gguf.tensors.size());
  for (const TensorView& g : gguf.tensors) {
    SCOPED_TRACE(g.name);
    const TensorView& h = hf.get(g.name);
    EXPECT_EQ(h.type, TensorType::kF32);
    ASSERT_EQ(h.shape, g.shape);
    const std::vector<float> hv = testing::to_f32(h), gv = testing::to_f32(g);
    for (size_t i = 0; i < hv.size(); ++i) {
      // The converter rounded F32 to F16 (round to nearest even); norms stayed F32.
      const float expected = g.type == TensorType::kF16 ? fp16_to_fp32(fp32_to_fp16(hv[i])) : hv[i];
      ASSERT_EQ(expected, gv[i]) << "element " << i;
    }
  }
}

TEST(HfLoader, Bf16FolderLoadsWithTheSameValues) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  const ModelFile f32 = load_model(shared_path(kHf));
  const ModelFile bf16 = load_model(shared_path("models/tinystories-656k/hf-bf16"));
  ASSERT_EQ(bf16.tensors.size(), f32.tensors.size());
  for (const TensorView& t : bf16.tensors) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.type, TensorType::kBF16);
    const std::vector<float> a = testing::to_f32(t), b = testing::to_f32(f32.get(t.name));
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], bf16_to_fp32(fp32_to_bf16(b[i])));
  }
}

TEST(HfLoader, TokenizerJsonGivesTheGgufTokenizerData) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  const TokenizerData a = load_model(shared_path(kHf)).tokenizer;
  const TokenizerData b =
      load_model(shared_path("models/tinystories-656k/TinyStories-656K-F16.gguf")).tokenizer;
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

TEST(HfLoader, PermuteMatchesLlamaCppForOneHead) {
  // One head of 4 rows: rotate-half order (r0 r1 | r2 r3) becomes pairs (r0 r2 r1 r3).
  const uint8_t in[8] = {0, 0, 1, 1, 2, 2, 3, 3};
  uint8_t out[8];
  permute_rope_rows(in, out, 4, 2, 1);
  const uint8_t expected[8] = {0, 0, 2, 2, 1, 1, 3, 3};
  EXPECT_EQ(std::memcmp(out, expected, 8), 0);
  // Two heads of 2 rows: nothing moves within a 2-row head.
  permute_rope_rows(in, out, 4, 2, 2);
  EXPECT_EQ(std::memcmp(out, in, 8), 0);
}

TEST(HfLoader, MapsNames) {
  auto name = [](const std::string& hf, const std::string& arch = "llama") {
    return gguf_target_for_hf(hf, arch, "f").name;
  };
  EXPECT_EQ(name("model.layers.12.self_attn.o_proj.weight"), "blk.12.attn_output.weight");
  EXPECT_EQ(name("model.layers.0.mlp.down_proj.weight"), "blk.0.ffn_down.weight");
  EXPECT_EQ(name("model.layers.3.self_attn.rotary_emb.inv_freq"), "");
  EXPECT_EQ(gguf_target_for_hf("model.layers.0.mlp.down_proj.weight", "llama", "f").expert, -1);
  expect_error([] { gguf_target_for_hf("model.layers.0.mlp.experts.weight", "qwen2moe", "f"); },
               ErrorCode::kUnsupported, "unexpected tensor 'model.layers.0.mlp.experts.weight'");
  // Layer indices are 1-6 digits followed by the rest of the name.
  for (const char* bad :
       {"model.layers.1234567.mlp.down_proj.weight", "model.layers..mlp.down_proj.weight",
        "model.layers.4", "x.model.layers.0.mlp.down_proj.weight"}) {
    expect_error([&] { gguf_target_for_hf(bad, "llama", "f"); }, ErrorCode::kUnsupported,
                 "unexpected tensor");
  }
  // Gemma 2's post_attention_layernorm follows attention; Llama's precedes the FFN.
  EXPECT_EQ(name("model.layers.1.post_attention_layernorm.weight"), "blk.1.ffn_norm.weight");
  EXPECT_EQ(name("model.layers.1.post_attention_layernorm.weight", "gemma2"),
            "blk.1.post_attention_norm.weight");
  EXPECT_EQ(name("model.layers.1.pre_feedforward_layernorm.weight", "gemma2"),
            "blk.1.ffn_norm.weight");
  EXPECT_EQ(name("model.layers.1.post_feedforward_layernorm.weight", "gemma2"),
            "blk.1.post_ffw_norm.weight");
  expect_error(
      [] { gguf_target_for_hf("model.layers.1.pre_feedforward_layernorm.weight", "llama", "f"); },
      ErrorCode::kUnsupported, "unexpected tensor");
  // Experts: Mixtral's w1/w3/w2 are gate/up/down.
  const HfTensorTarget w3 =
      gguf_target_for_hf("model.layers.2.block_sparse_moe.experts.7.w3.weight", "llama", "f");
  EXPECT_EQ(w3.name, "blk.2.ffn_up_exps.weight");
  EXPECT_EQ(w3.expert, 7);
  EXPECT_EQ(name("model.layers.2.block_sparse_moe.gate.weight"), "blk.2.ffn_gate_inp.weight");
  const HfTensorTarget down =
      gguf_target_for_hf("model.layers.0.mlp.experts.12.down_proj.weight", "qwen2moe", "f");
  EXPECT_EQ(down.name, "blk.0.ffn_down_exps.weight");
  EXPECT_EQ(down.expert, 12);
  EXPECT_EQ(name("model.layers.0.mlp.gate.weight", "qwen2moe"), "blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(name("model.layers.0.mlp.shared_expert.up_proj.weight", "qwen2moe"),
            "blk.0.ffn_up_shexp.weight");
  EXPECT_EQ(name("model.layers.0.mlp.shared_expert_gate.weight", "qwen2moe"),
            "blk.0.ffn_gate_inp_shexp.weight");
  expect_error(
      [] { gguf_target_for_hf("model.layers.0.mlp.experts.1.w1.weight", "qwen2moe", "f"); },
      ErrorCode::kUnsupported, "unexpected tensor");
}

TEST(HfLoader, Gemma2ConfigReadsItsKeysOrTransformersDefaults) {
  const std::string common =
      R"("architectures": ["Gemma2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 4, "num_attention_heads": 2, "vocab_size": 16)";
  // query_pre_attn_scalar is read, not derived from the model size as for GGUF files.
  ModelConfig c =
      config_from_hf_json("{" + common + R"(, "head_dim": 32, "query_pre_attn_scalar": 16,
          "attn_logit_softcapping": null, "final_logit_softcapping": 7.5, "sliding_window": 8,
          "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                          "full_attention"]})",
                          "g");
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_EQ(c.query_scale, 0.25f);
  EXPECT_EQ(c.attn_softcap, 0.0f);  // null: no cap
  EXPECT_EQ(c.final_softcap, 7.5f);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.window_layers, WindowLayers::kPattern);
  EXPECT_EQ(c.window_period, 2);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c.post_norms && c.tied_embeddings);
  c = config_from_hf_json("{" + common + "}", "g");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.query_scale, 1.0f / 16.0f);
  EXPECT_EQ(c.attn_softcap, 50.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, 4096);
  expect_error(
      [&] { config_from_hf_json("{" + common + R"(, "hidden_activation": "gelu"})", "g"); },
      ErrorCode::kUnsupported, "hidden_activation 'gelu'");
  expect_error(
      [&] {
        config_from_hf_json("{" + common + R"(, "layer_types": ["full_attention",
            "sliding_attention", "full_attention", "sliding_attention"]})",
                            "g");
      },
      ErrorCode::kUnsupported, "layer_types");
}

// transformers windows every Mistral layer when sliding_window is set (Mistral 7B v0.1:
// 4096) and none when it is null (v0.2 on); Llama has no window whatever the config says.
TEST(HfLoader, MistralSlidingWindowCoversEveryLayer) {
  const std::string common =
      R"("hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "vocab_size": 16)";
  auto window = [&](const std::string& arch, const std::string& value) {
    return config_from_hf_json(R"({"architectures": [")" + arch + R"("], "sliding_window": )" +
                                   value + ", " + common + "}",
                               "m")
        .every_layer_window();
  };
  EXPECT_EQ(window("MistralForCausalLM", "4096"), 4096);
  EXPECT_EQ(window("MistralForCausalLM", "null"), 0);
  EXPECT_EQ(window("LlamaForCausalLM", "4096"), 0);
  EXPECT_EQ(window("Qwen2ForCausalLM", "4096"), 0);  // use_sliding_window is off by default
  EXPECT_THROW(window("MistralForCausalLM", "-3"), Error);
}

TEST(HfLoader, MoeConfigsGiveExpertCounts) {
  const std::string common =
      R"("hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "vocab_size": 16, "num_experts_per_tok": 2)";
  ModelConfig c = config_from_hf_json(
      R"({"architectures": ["MixtralForCausalLM"], "num_local_experts": 8, "sliding_window": 4,
          )" +
          common + "}",
      "m");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 2);
  EXPECT_EQ(c.expert_ffn_dim, 128);
  EXPECT_TRUE(c.normalize_expert_weights);
  EXPECT_EQ(c.every_layer_window(), 4);  // Mistral-style: every layer
  const std::string qwen =
      R"({"architectures": ["Qwen2MoeForCausalLM"], "num_experts": 4, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 96, )" +
      common;
  c = config_from_hf_json(qwen + "}", "q");
  EXPECT_EQ(c.architecture, "qwen2moe");
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.expert_ffn_dim, 32);
  EXPECT_EQ(c.shared_expert_ffn_dim, 96);
  EXPECT_FALSE(c.normalize_expert_weights);
  EXPECT_TRUE(
      config_from_hf_json(qwen + R"(, "norm_topk_prob": true})", "q").normalize_expert_weights);
  expect_error([&] { config_from_hf_json(qwen + R"(, "mlp_only_layers": [1]})", "q"); },
               ErrorCode::kUnsupported, "dense layers");
  expect_error([&] { config_from_hf_json(qwen + R"(, "decoder_sparse_step": 2})", "q"); },
               ErrorCode::kUnsupported, "dense layers");
  expect_error(
      [&] {
        config_from_hf_json(R"({"architectures": ["MixtralForCausalLM"], )" + common + "}", "m");
      },
      ErrorCode::kCorrupt, "lacks 'num_local_experts'");
}

// Writes a safetensors file of F32 tensors {name: (shape, values)}.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                       std::vector<std::vector<float>>* values = nullptr) {
  json header = json::object();
  std::vector<uint8_t> body;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : tensors[i].second) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) v[j] = static_cast<float>(i) + 0.001f * static_cast<float>(j);
    header[tensors[i].first] = {{"dtype", "F32"},
                                {"shape", tensors[i].second},
                                {"data_offsets", {body.size(), body.size() + v.size() * 4}}};
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    body.insert(body.end(), p, p + v.size() * 4);
    if (values) values->push_back(std::move(v));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> bytes(8);
  const uint64_t length = text.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.insert(bytes.end(), body.begin(), body.end());
  testing::write_file(path, bytes);
}

// A 2-layer Qwen2 with dim 8, 2 heads, 1 KV head, ffn 16, vocab 8 (6 in tokenizer.json).
void write_qwen2_folder(const testing::TempDir& dir, bool sharded) {
  testing::write_file(dir.file("config.json"),
                      json{{"architectures", {"Qwen2ForCausalLM"}},
                           {"model_type", "qwen2"},
                           {"hidden_size", 8},
                           {"intermediate_size", 16},
                           {"num_hidden_layers", 2},
                           {"num_attention_heads", 2},
                           {"num_key_value_heads", 1},
                           {"max_position_embeddings", 128},
                           {"rms_norm_eps", 1e-6},
                           {"rope_theta", 1000000.0},
                           {"rope_scaling", {{"type", "linear"}, {"factor", 4.0}}},
                           {"vocab_size", 8},
                           {"tie_word_embeddings", true},
                           {"eos_token_id", 5}}
                          .dump());
  std::vector<std::pair<std::string, std::vector<int64_t>>> all = {
      {"model.embed_tokens.weight", {8, 8}}, {"model.norm.weight", {8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"input_layernorm.weight", {8}},
             {"post_attention_layernorm.weight", {8}},
             {"self_attn.q_proj.weight", {8, 8}},
             {"self_attn.k_proj.weight", {4, 8}},
             {"self_attn.v_proj.weight", {4, 8}},
             {"self_attn.q_proj.bias", {8}},
             {"self_attn.k_proj.bias", {4}},
             {"self_attn.v_proj.bias", {4}},
             {"self_attn.o_proj.weight", {8, 8}},
             {"mlp.gate_proj.weight", {16, 8}},
             {"mlp.up_proj.weight", {16, 8}},
             {"mlp.down_proj.weight", {8, 16}}}) {
      all.push_back({p + name, shape});
    }
  }
  if (sharded) {
    json index = {{"weight_map", json::object()}};
    std::vector<std::pair<std::string, std::vector<int64_t>>> shard[2];
    for (size_t i = 0; i < all.size(); ++i) {
      shard[i % 2].push_back(all[i]);
      index["weight_map"][all[i].first] =
          "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
    }
    write_safetensors(dir.file("model-00001-of-00002.safetensors"), shard[0]);
    write_safetensors(dir.file("model-00002-of-00002.safetensors"), shard[1]);
    testing::write_file(dir.file("model.safetensors.index.json"), index.dump());
  } else {
    write_safetensors(dir.file("model.safetensors"), all);
  }
  const json tokenizer = {
      {"model",
       {{"type", "BPE"},
        {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\xc4\xa0", 3}}},
        {"merges", json::array({json::array({"a", "b"})})}}},
      {"added_tokens",
       {{{"id", 4}, {"content", "<|im_start|>"}, {"special", true}},
        {{"id", 5}, {"content", "<|im_end|>"}, {"special", true}},
        {{"id", 6}, {"content", "<tool>"}, {"special", false}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"}}}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}}}};
  testing::write_file(dir.file("tokenizer.json"), tokenizer.dump());
  testing::write_file(dir.file("tokenizer_config.json"), json{{"add_bos_token", false},
                                                              {"eos_token", "<|im_end|>"},
                                                              {"chat_template", "{{ messages }}"}}
                                                             .dump());
}

TEST(HfLoader, Qwen2FolderKeepsNeoxLayoutAndBiases) {
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "sharded" : "single file");
    testing::TempDir dir;
    write_qwen2_folder(dir, sharded);
    const ModelFile m = load_model(dir.path().string());
    const ModelConfig& c = m.config;
    EXPECT_EQ(c.architecture, "qwen2");
    EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.rope_scale, 4.0f);
    EXPECT_EQ(c.rope_theta, 1000000.0f);
    EXPECT_EQ(c.head_dim, 4);
    EXPECT_EQ(m.get("blk.1.attn_k.weight").shape, (std::vector<int64_t>{8, 4}));
    EXPECT_EQ(m.get("blk.1.ffn_down.weight").shape, (std::vector<int64_t>{16, 8}));
    // Not permuted: rows stay in file order (row r of q_proj starts with value i + 0.008 r).
    const std::vector<float> q = testing::to_f32(m.get("blk.0.attn_q.weight"));
    for (int r = 0; r < 8; ++r) EXPECT_NEAR(q[r * 8 + 1] - q[r * 8], 0.001f, 1e-5) << r;
    EXPECT_NEAR(q[8] - q[0], 0.008f, 1e-5);
    const TokenizerData& t = m.tokenizer;
    EXPECT_EQ(t.kind, TokenizerKind::kByteLevelBpe);
    EXPECT_EQ(t.pre, "qwen2");
    ASSERT_EQ(t.tokens.size(), 8u);
    EXPECT_EQ(t.tokens[7], "[PAD7]");
    EXPECT_EQ(t.types[7], TokenType::kUnused);
    EXPECT_EQ(t.types[4], TokenType::kControl);
    EXPECT_EQ(t.types[6], TokenType::kUserDefined);
    EXPECT_EQ(t.merges, std::vector<std::string>{"a b"});
    EXPECT_EQ(t.eos_id, 5);
    EXPECT_EQ(t.bos_id, -1);
    EXPECT_FALSE(t.add_bos);
    EXPECT_FALSE(t.add_space_prefix);
    EXPECT_EQ(t.chat_template, "{{ messages }}");
  }
}

TEST(HfLoader, LlamaQAndKArePermutedLikeLlamaCpp) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  // TinyStories head_dim 16: GGUF row 1 of head 0 is HF row 8 (the second half's first row).
  const ModelFile hf = load_model(shared_path(kHf));
  const SafetensorsFile raw = SafetensorsFile::open(shared_path(kHf + "/model.safetensors"));
  const SafetensorsTensor* k = nullptr;
  for (const auto& t : raw.tensors()) {
    if (t.name == "model.layers.1.self_attn.k_proj.weight") k = &t;
  }
  ASSERT_NE(k, nullptr);
  const TensorView& view = hf.get("blk.1.attn_k.weight");
  const size_t row = 128 * 4;
  EXPECT_EQ(std::memcmp(view.data + 1 * row, k->data + 8 * row, row), 0);
  EXPECT_EQ(std::memcmp(view.data + 2 * row, k->data + 1 * row, row), 0);
  EXPECT_EQ(std::memcmp(view.data + 17 * row, k->data + 24 * row, row), 0);  // head 1
}

TEST(HfLoader, RejectsBrokenFolders) {
  testing::TempDir dir;
  write_qwen2_folder(dir, false);
  const std::string config = read_text_file(dir.file("config.json"));
  testing::write_file(dir.file("config.json"),
                      std::string("{\"architectures\": [\"GPT2LMHeadModel\"]}"));
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kUnsupported,
               "architecture 'GPT2LMHeadModel' is not supported");
  json bad = json::parse(config);
  bad["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  testing::write_file(dir.file("config.json"), bad.dump());
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kUnsupported,
               "rope_scaling type 'dynamic'");
  bad["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"mscale", 0.7}};
  testing::write_file(dir.file("config.json"), bad.dump());
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kUnsupported,
               "rope_scaling key 'mscale'");
  bad = json::parse(config);
  bad.erase("hidden_size");
  testing::write_file(dir.file("config.json"), bad.dump());
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kCorrupt,
               "config.json lacks 'hidden_size'");
  testing::write_file(dir.file("config.json"), std::string("{not json"));
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kCorrupt, "not valid JSON");
  testing::write_file(dir.file("config.json"), config);
  testing::write_file(dir.file("tokenizer.json"),
                      std::string("{\"model\": {\"type\": \"Unigram\"}}"));
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kUnsupported,
               "model type 'Unigram'");
}

// The loaders walk pre-tokenizer sequences recursively: a tokenizer.json nesting 200k of them
// overflowed the stack. Nesting is bounded in every JSON of a model folder.
// Issue 18 item 18: these loaded, padded with placeholder tokens, and generated garbage.
TEST(HfLoader, RejectsEmptyOrBrokenVocabularies) {
  const auto tokenizer_json = [](const std::string& vocab) {
    return R"({"model": {"type": "BPE", "byte_fallback": true, "merges": [], "vocab": )" + vocab +
           "}}";
  };
  HfTokenizerInputs in;
  in.vocab_size = 2048;
  in.tokenizer_json = tokenizer_json("{}");
  expect_error([&] { parse_hf_tokenizer(in, "empty"); }, ErrorCode::kCorrupt, "empty vocabulary");
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "a": 1, "b": 1})");
  expect_error([&] { parse_hf_tokenizer(in, "dup"); }, ErrorCode::kCorrupt, "share the id 1");
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "a": "one"})");
  expect_error([&] { parse_hf_tokenizer(in, "id"); }, ErrorCode::kCorrupt, "invalid id");
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "<s>": 1, "</s>": 2})");
  EXPECT_EQ(parse_hf_tokenizer(in, "padded").tokens.size(), 2048u);  // padded to vocab_size
  // A handful of tokens spanning millions of ids (found by hf_tokenizer_fuzz: 7 s and 580 MB
  // of placeholders for a 1 KiB file), through an id or through vocab_size.
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "<s>": 1, "</s>": 2442254})");
  expect_error([&] { parse_hf_tokenizer(in, "sparse"); }, ErrorCode::kCorrupt,
               "defines 3 tokens but the vocabulary would span 2442255 ids");
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "<s>": 1, "</s>": 2})");
  in.vocab_size = 5000000;
  expect_error([&] { parse_hf_tokenizer(in, "huge"); }, ErrorCode::kCorrupt, "vocab_size 5000000");
  // Gaps a real file has stay accepted: added tokens past the base vocabulary.
  in.vocab_size = 0;
  in.tokenizer_json = tokenizer_json(R"({"<unk>": 0, "<s>": 1, "</s>": 65537})");
  EXPECT_EQ(parse_hf_tokenizer(in, "gap").tokens.size(), 65538u);
}

// A field of the wrong type threw a JSON type error that no caller expected (found by
// hf_tokenizer_fuzz: "byte_fallback": 61 ended the process); it is a corrupt file.
TEST(HfLoader, TokenizerFieldsOfTheWrongTypeAreCorrupt) {
  HfTokenizerInputs in;
  in.tokenizer_json =
      R"({"model": {"type": "BPE", "byte_fallback": 61, "merges": [], "vocab": {"a": 0}}})";
  expect_error([&] { parse_hf_tokenizer(in, "a"); }, ErrorCode::kCorrupt, "wrong type");
  in.tokenizer_json = R"({"model": {"type": 7, "vocab": {"a": 0}}})";
  expect_error([&] { parse_hf_tokenizer(in, "b"); }, ErrorCode::kCorrupt, "wrong type");
  in.tokenizer_json = R"({"added_tokens": [{"id": 1, "content": "x", "special": "yes"}],
      "model": {"type": "BPE", "byte_fallback": true, "merges": [], "vocab": {"a": 0}}})";
  expect_error([&] { parse_hf_tokenizer(in, "c"); }, ErrorCode::kCorrupt, "wrong type");
}

// Red-team (issue 53, old 18): merges set to 1, "x", {} or holding junk entries loaded without
// a word. Both kinds of tokenizer.json refuse them as a corrupt file naming the field.
TEST(HfLoader, MergesThatAreNoListOfMergesAreCorrupt) {
  const auto tokenizer_json = [](bool byte_level, const std::string& merges) {
    return std::string(R"({"model": {"type": "BPE", )") +
           (byte_level ? "" : R"("byte_fallback": true, )") + R"("merges": )" + merges +
           R"(, "vocab": {"a": 0, "b": 1, "ab": 2}})" +
           (byte_level ? R"(, "pre_tokenizer": {"type": "ByteLevel"}})" : "}");
  };
  for (const bool byte_level : {true, false}) {
    SCOPED_TRACE(byte_level ? "byte-level" : "SentencePiece-style");
    HfTokenizerInputs in;
    for (const std::string merges : {"1", "\"x\"", "{}", "null", "true"}) {
      in.tokenizer_json = tokenizer_json(byte_level, merges);
      expect_error([&] { parse_hf_tokenizer(in, "m"); }, ErrorCode::kCorrupt, "model.merges is a");
    }
    for (const std::string junk :
         {"1", "{}", "null", "\"x\"", "\"a  b\"", "\"a b c\"", "\" b\"", "\"a \"", "[]", "[\"a\"]",
          "[\"a\", 1]", "[\"a\", \"\"]", "[\"a\", \"b\", \"c\"]"}) {
      SCOPED_TRACE(junk);
      in.tokenizer_json = tokenizer_json(byte_level, "[\"a b\", " + junk + "]");
      expect_error([&] { parse_hf_tokenizer(in, "m"); }, ErrorCode::kCorrupt, "model.merges[1]");
    }
    // What real files hold stays accepted: strings, pairs (tokenizers >= 0.20), none at all.
    in.tokenizer_json = tokenizer_json(byte_level, R"(["a b", ["ab", "b"]])");
    const TokenizerData t = parse_hf_tokenizer(in, "m");
    if (byte_level) {
      EXPECT_EQ(t.merges, (std::vector<std::string>{"a b", "ab b"}));
    }
    in.tokenizer_json = tokenizer_json(byte_level, "[]");
    EXPECT_NO_THROW(parse_hf_tokenizer(in, "m"));
  }
}

TEST(HfLoader, RejectsDeeplyNestedJson) {
  testing::TempDir dir;
  write_qwen2_folder(dir, false);
  json tokenizer = json::parse(read_text_file(dir.file("tokenizer.json")));
  tokenizer["pre_tokenizer"] = "@";
  std::string deep;
  const int depth = 200000;
  for (int i = 0; i < depth; ++i) deep += "{\"type\": \"Sequence\", \"pretokenizers\": [";
  deep += "{\"type\": \"ByteLevel\"}";
  for (int i = 0; i < depth; ++i) deep += "]}";
  std::string text = tokenizer.dump();
  text.replace(text.find("\"@\""), 3, deep);
  testing::write_file(dir.file("tokenizer.json"), text);
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kCorrupt,
               "tokenizer.json nests arrays/objects more than");
}

std::vector<uint8_t> safetensors_bytes(const std::string& header, size_t body_bytes) {
  std::vector<uint8_t> b(8 + header.size() + body_bytes, 0);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

TEST(Safetensors, RejectsMalformedFiles) {
  auto parse = [](const std::vector<uint8_t>& b) {
    SafetensorsFile::parse(b.data(), b.size(), "x.safetensors");
  };
  std::vector<uint8_t> b = safetensors_bytes("{}", 0);
  const uint64_t huge = 1000;
  std::memcpy(b.data(), &huge, 8);
  expect_error([&] { parse(b); }, ErrorCode::kCorrupt, "header length 1000 exceeds");
  expect_error([&] { parse(safetensors_bytes("{\"a\":", 0)); }, ErrorCode::kCorrupt,
               "not valid JSON");
  expect_error(
      [&] {
        parse(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4));
      },
      ErrorCode::kCorrupt, "outside the 4-byte data");
  expect_error(
      [&] {
        parse(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
      },
      ErrorCode::kCorrupt, "holds 8 bytes but its shape and dtype need 12");
  expect_error(
      [&] {
        parse(safetensors_bytes(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
      },
      ErrorCode::kUnsupported, "dtype I64");
  expect_error(
      [&] {
        parse(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8));
      },
      ErrorCode::kCorrupt, "shape entry");
  expect_error([&] { parse(safetensors_bytes(R"({"a":{"dtype":"F32"}})", 0)); },
               ErrorCode::kCorrupt, "lacks dtype/shape/data_offsets");
  const auto ok = safetensors_bytes(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
      8);
  const SafetensorsFile f = SafetensorsFile::parse(ok.data(), ok.size(), "ok");
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].type, TensorType::kF16);
}

}  // namespace
}  // namespace rapide
