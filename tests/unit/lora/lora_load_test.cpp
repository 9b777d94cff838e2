// The adapter readers (lora/lora_load.h): --lora specs, and every refusal, each on a copy of
// tests/data/lora's adapters with one thing changed (written in this binary's temporary
// directory), so that each test fails if its check is removed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors_reader.h"
#include "lora_test_util.h"
#include "unit/formats/formats_test_util.h"

namespace rapide::testing {
namespace {

namespace fs = std::filesystem;

// An adapter file's contents, to edit and write back.
struct GgufContents {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Tensor> tensors;

  static GgufContents read(const std::string& path) {
    const GgufFile file = GgufFile::open(path);
    GgufContents c;
    for (const GgufKeyValue& kv : file.metadata()) c.metadata.emplace_back(kv.key, kv.value);
    for (const GgufTensorInfo& t : file.tensors()) {
      c.tensors.push_back({t.name, t.type, t.shape, {t.data, t.data + t.size_bytes}});
    }
    return c;
  }
  void set(const std::string& key, GgufValue value) {
    for (auto& [k, v] : metadata) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    metadata.emplace_back(key, std::move(value));
  }
  void erase(const std::string& key) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
  }
  Tensor& tensor(const std::string& name) {
    for (Tensor& t : tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no tensor " + name);
  }
  void write(const std::string& path) const {
    GgufWriter w;
    for (const auto& [k, v] : metadata) w.set(k, v);
    for (const Tensor& t : tensors)
      w.add_tensor(t.name, t.type, t.shape, t.bytes.data(), t.bytes.size());
    w.write(path);
  }
};

// A PEFT folder's contents.
struct PeftContents {
  nlohmann::json config;
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;  // row-major, as stored
    std::vector<float> values;
  };
  std::vector<Tensor> tensors;

  static PeftContents read(const std::string& dir) {
    PeftContents c;
    c.config = nlohmann::json::parse(read_text_file(dir + "/adapter_config.json"));
    const SafetensorsFile file = SafetensorsFile::open(dir + "/adapter_model.safetensors");
    for (const SafetensorsTensor& t : file.tensors()) {
      std::vector<float> v(t.size_bytes / 4);
      std::memcpy(v.data(), t.data, t.size_bytes);
      c.tensors.push_back({t.name, t.shape, std::move(v)});
    }
    return c;
  }
  void write(const std::string& dir) const {
    fs::create_directories(dir);
    write_file(dir + "/adapter_config.json", config.dump());
    nlohmann::json header = nlohmann::json::object();
    size_t offset = 0;
    for (const Tensor& t : tensors) {
      header[t.name] = {{"dtype", "F32"},
                        {"shape", t.shape},
                        {"data_offsets", {offset, offset + t.values.size() * 4}}};
      offset += t.values.size() * 4;
    }
    std::string text = header.dump();
    const uint64_t length = text.size();
    std::string bytes(reinterpret_cast<const char*>(&length), 8);
    bytes += text;
    for (const Tensor& t : tensors) {
      bytes.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    }
    write_file(dir + "/adapter_model.safetensors", bytes);
  }
};

class LoraLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kBaseModel);
    base_ = std::make_shared<const ModelFile>(load_model(shared_path(kBaseModel)));
  }
  std::shared_ptr<const LoraAdapter> load(const std::string& path, float scale = 1.0f) {
    return load_lora(LoraSpec{"x", path, scale}, *base_);
  }
  // Edits a copy of lora-a.gguf and expects loading it to fail with `code` naming `part`.
  void expect_gguf_refused(const std::function<void(GgufContents&)>& edit, ErrorCode code,
                           const std::string& part) {
    GgufContents c = GgufContents::read(lora_path("adapters/lora-a.gguf"));
    edit(c);
    const std::string path = dir_.file("edited.gguf");
    c.write(path);
    expect_error([&] { load(path); }, code, part);
  }
  void expect_peft_refused(const std::function<void(PeftContents&)>& edit, ErrorCode code,
                           const std::string& part) {
    PeftContents c = PeftContents::read(lora_path("adapters/peft-lora-a"));
    edit(c);
    const std::string path = dir_.file("peft-" + std::to_string(count_++));
    c.write(path);
    expect_error([&] { load(path); }, code, part);
  }
  std::shared_ptr<const ModelFile> base_;
  TempDir dir_;
  int count_ = 0;
};

TEST(LoraSpecs, NamePathAndScale) {
  LoraSpec s = parse_lora_spec("chat=/models/a.gguf:0.5");
  EXPECT_EQ(s.name, "chat");
  EXPECT_EQ(s.path, "/models/a.gguf");
  EXPECT_EQ(s.scale, 0.5f);
  s = parse_lora_spec("/models/tuned-v2.gguf");
  EXPECT_EQ(s.name, "tuned-v2");
  EXPECT_EQ(s.scale, 1.0f);
  s = parse_lora_spec("adapters/peft-sql/:2");
  EXPECT_EQ(s.name, "peft-sql");
  EXPECT_EQ(s.path, "adapters/peft-sql/");
  EXPECT_EQ(s.scale, 2.0f);
  s = parse_lora_spec("x=dir:with:colons");  // not a number: part of the path
  EXPECT_EQ(s.path, "dir:with:colons");
  expect_error([] { parse_lora_spec("bad name=a.gguf"); }, ErrorCode::kInvalidArgument,
               "adapter name");
  expect_error([] { parse_lora_spec("a="); }, ErrorCode::kInvalidArgument, "names no path");
  expect_error([] { parse_lora_spec("a=b.gguf:inf"); }, ErrorCode::kInvalidArgument, "finite");
}

TEST_F(LoraLoad, ReadsBothFormsWithTheirScales) {
  const auto gguf = load(lora_path("adapters/lora-a.gguf"), 0.5f);
  EXPECT_EQ(gguf->count(), 7);
  EXPECT_EQ(gguf->find(0, LoraTarget::kDown)->scale, 0.5f * 16.0f / 8.0f);
  EXPECT_EQ(gguf->find(0, LoraTarget::kDown)->a.rows(), 8);
  EXPECT_EQ(gguf->find(0, LoraTarget::kDown)->a.cols(), 512);
  const auto peft = load(lora_path("adapters/peft-lora-b"));
  EXPECT_EQ(peft->count(), 3);
  EXPECT_EQ(peft->find(0, LoraTarget::kK), nullptr);
  EXPECT_EQ(peft->find(0, LoraTarget::kV)->scale, 1.0f);  // alpha 4 / r 4
  EXPECT_GT(peft->bytes(), 0u);
}

// llama.cpp reads a GGUF without adapter.lora.alpha as alpha 0: the scale is the user's.
TEST_F(LoraLoad, GgufWithoutAlphaRunsAtTheUsersScale) {
  GgufContents c = GgufContents::read(lora_path("adapters/lora-a.gguf"));
  c.erase("adapter.lora.alpha");
  const std::string path = dir_.file("no-alpha.gguf");
  c.write(path);
  EXPECT_EQ(load(path, 0.25f)->find(0, LoraTarget::kQ)->scale, 0.25f);
}

TEST_F(LoraLoad, PeftRsLoraDividesBySqrtRank) {
  PeftContents c = PeftContents::read(lora_path("adapters/peft-lora-a"));
  c.config["use_rslora"] = true;
  const std::string path = dir_.file("rslora");
  c.write(path);
  EXPECT_EQ(load(path)->find(0, LoraTarget::kQ)->scale, 16.0f / std::sqrt(8.0f));
}

TEST_F(LoraLoad, GgufRefusals) {
  expect_error([&] { load(shared_path(kBaseModel)); }, ErrorCode::kInvalidArgument,
               "is not a LoRA adapter");
  expect_error([&] { load(dir_.file("absent.gguf")); }, ErrorCode::kNotFound, "absent.gguf");
  expect_gguf_refused([](GgufContents& c) { c.set("adapter.type", GgufValue::string("cvec")); },
                      ErrorCode::kUnsupported, "type 'cvec'");
  expect_gguf_refused(
      [](GgufContents& c) { c.set("general.architecture", GgufValue::string("qwen2")); },
      ErrorCode::kInvalidArgument, "architecture 'qwen2'");
  // Targets rapide does not adapt, named.
  expect_gguf_refused(
      [](GgufContents& c) {
        c.tensor("blk.0.attn_q.weight.lora_a").name = "token_embd.weight.lora_a";
        c.tensor("blk.0.attn_q.weight.lora_b").name = "token_embd.weight.lora_b";
      },
      ErrorCode::kUnsupported, "token embedding");
  expect_gguf_refused(
      [](GgufContents& c) {
        c.tensor("blk.0.attn_q.weight.lora_a").name = "blk.0.attn_qkv.weight.lora_a";
        c.tensor("blk.0.attn_q.weight.lora_b").name = "blk.0.attn_qkv.weight.lora_b";
      },
      ErrorCode::kUnsupported, "'blk.0.attn_qkv.weight', which rapide does not");
  expect_gguf_refused(
      [](GgufContents& c) {
        GgufContents::Tensor norm = c.tensor("blk.0.attn_q.weight.lora_a");
        norm.name = "blk.0.attn_norm.weight";
        norm.shape = {256};
        norm.bytes.resize(256 * 4);
        c.tensors.push_back(norm);
      },
      ErrorCode::kUnsupported, "norm tensor 'blk.0.attn_norm.weight'");
  // Malformed pairs and names.
  expect_gguf_refused(
      [](GgufContents& c) {
        std::erase_if(c.tensors,
                      [](const auto& t) { return t.name == "blk.0.ffn_up.weight.lora_b"; });
      },
      ErrorCode::kCorrupt, "'blk.0.ffn_up.weight' has a lora_a but no lora_b");
  expect_gguf_refused(
      [](GgufContents& c) { c.tensor("blk.0.ffn_up.weight.lora_b").name = "blk.0.ffn_up.delta"; },
      ErrorCode::kCorrupt, "neither a lora_a nor a lora_b");
  // Another base: a layer it lacks, a pair that does not fit its matrix.
  expect_gguf_refused(
      [](GgufContents& c) {
        c.tensor("blk.0.attn_q.weight.lora_a").name = "blk.3.attn_q.weight.lora_a";
        c.tensor("blk.0.attn_q.weight.lora_b").name = "blk.3.attn_q.weight.lora_b";
      },
      ErrorCode::kInvalidArgument, "does not have");
  expect_gguf_refused(
      [](GgufContents& c) {  // attn_q's B (256 rows) under attn_k (128)
        std::swap(c.tensor("blk.0.attn_q.weight.lora_b").name,
                  c.tensor("blk.0.attn_k.weight.lora_b").name);
      },
      ErrorCode::kInvalidArgument, "do not fit the base's [256, 128]");
  expect_gguf_refused(
      [](GgufContents& c) {  // a quantized A: Q8_0 rows of 256
        GgufContents::Tensor& a = c.tensor("blk.0.attn_q.weight.lora_a");
        std::vector<float> values(a.bytes.size() / 4);
        std::memcpy(values.data(), a.bytes.data(), a.bytes.size());
        a.type = TensorType::kQ8_0;
        a.bytes.assign(static_cast<size_t>(tensor_row_bytes(TensorType::kQ8_0, 256)) * 8, 0);
        quantize_row(TensorType::kQ8_0, values.data(), a.bytes.data(), 256 * 8);
      },
      ErrorCode::kUnsupported, "quantized adapters are not supported");
}

TEST_F(LoraLoad, AnAdapterForAnotherBaseIsRefused) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models/llama-moe-F32.gguf");
  const ModelFile moe = load_model(shared_path("reference/llamacpp/models/llama-moe-F32.gguf"));
  expect_error(
      [&] {
        load_lora(LoraSpec{"x", lora_path("adapters/lora-a.gguf"), 1.0f}, moe);
      },
      ErrorCode::kInvalidArgument, "another base model");
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models/qwen2-F32.gguf");
  const ModelFile qwen = load_model(shared_path("reference/llamacpp/models/qwen2-F32.gguf"));
  expect_error(
      [&] {
        load_lora(LoraSpec{"x", lora_path("adapters/lora-a.gguf"), 1.0f}, qwen);
      },
      ErrorCode::kInvalidArgument, "made for architecture 'llama'");
}

TEST_F(LoraLoad, PeftRefusals) {
  const auto config = [](const char* key, nlohmann::json value) {
    return [=](PeftContents& c) { c.config[key] = value; };
  };
  expect_peft_refused(config("use_dora", true), ErrorCode::kUnsupported, "DoRA");
  expect_peft_refused(config("peft_type", "IA3"), ErrorCode::kUnsupported, "peft_type \"IA3\"");
  expect_peft_refused(config("rank_pattern", {{"q_proj", 4}}), ErrorCode::kUnsupported,
                      "rank_pattern");
  expect_peft_refused(config("alpha_pattern", {{"q_proj", 4}}), ErrorCode::kUnsupported,
                      "alpha_pattern");
  expect_peft_refused(config("modules_to_save", {"lm_head"}), ErrorCode::kUnsupported,
                      "modules_to_save");
  expect_peft_refused(config("bias", "all"), ErrorCode::kUnsupported, "bias \"all\"");
  expect_peft_refused(config("fan_in_fan_out", true), ErrorCode::kUnsupported, "fan_in_fan_out");
  expect_peft_refused(config("target_modules", {"q_proj", "embed_tokens"}), ErrorCode::kUnsupported,
                      "target module 'embed_tokens'");
  expect_peft_refused(config("r", 4), ErrorCode::kInvalidArgument, "rank 8, not r = 4");
  expect_peft_refused(config("lora_alpha", 0), ErrorCode::kCorrupt, "lora_alpha");
  expect_peft_refused(
      [](PeftContents& c) {
        c.tensors.push_back(
            {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector",
             {256},
             std::vector<float>(256, 1.0f)});
      },
      ErrorCode::kUnsupported, "DoRA magnitude");
  expect_peft_refused(
      [](PeftContents& c) {
        for (auto& t : c.tensors) {
          if (t.name.find("q_proj") != std::string::npos) {
            t.name.replace(t.name.find("self_attn.q_proj"), 16, "self_attn.rotary");
          }
        }
      },
      ErrorCode::kUnsupported, "adapts 'model.layers.0.self_attn.rotary.weight'");
  expect_peft_refused(
      [](PeftContents& c) { c.tensors.erase(c.tensors.begin()); },  // q_proj's lora_A
      ErrorCode::kCorrupt, "has a lora_B but no lora_A");
  expect_peft_refused([](PeftContents& c) { c.tensors[0].name = "q_proj.weight"; },
                      ErrorCode::kCorrupt, "lora_A/lora_B.weight");
  // No weights, or the pickled form only.
  const std::string no_weights = dir_.file("no-weights");
  fs::create_directories(no_weights);
  fs::copy_file(lora_path("adapters/peft-lora-a/adapter_config.json"),
                no_weights + "/adapter_config.json");
  expect_error([&] { load(no_weights); }, ErrorCode::kNotFound, "adapter_model.safetensors");
  expect_error([&] { load(dir_.path().string()); }, ErrorCode::kNotFound,
               "without adapter_config.json");
}

}  // namespace
}  // namespace rapide::testing
