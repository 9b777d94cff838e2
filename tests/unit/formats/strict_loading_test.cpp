// The loader never guesses (formats/known_keys.h, formats/hf_config_keys.h,
// formats/unused_tensors.h): for every supported architecture's reference file, a copy with
// one extra tensor rapide does not use and a copy with one math-changing key rapide does not
// implement are both refused with a line naming them; and every shared model file that
// loads still loads. The modified copies are written with the project's GGUF writer into
// the test's own temporary directory.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "formats/architecture.h"
#include "formats/architecture_list.h"
#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config_keys.h"
#include "formats/hf_loader.h"
#include "formats/known_keys.h"
#include "formats/model_file.h"
#include "formats/unused_tensors.h"
#include "formats_test_util.h"
#include "model/model.h"
#include "test_paths.h"

namespace rapide {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::shared_path;
using testing::TempDir;

// Loads `path` and builds its Model: where both the key rule (load) and the tensor rule
// (Model construction) apply.
void load_and_build(const std::string& path) {
  auto file = std::make_shared<const ModelFile>(load_model(path));
  const Model model(file);
}

// A copy of the GGUF at `path` with `edit` applied to a writer holding all of its keys and
// tensors.
std::string edited_copy(const std::string& path, const TempDir& dir, const std::string& name,
                        const std::function<void(GgufWriter&)>& edit) {
  const GgufFile in = GgufFile::open(path);
  GgufWriter w;
  for (const GgufKeyValue& kv : in.metadata()) w.set(kv.key, kv.value);
  for (const GgufTensorInfo& t : in.tensors()) {
    w.add_tensor(t.name, t.type, t.shape, t.data, t.size_bytes);
  }
  edit(w);
  const std::string out = dir.file(name);
  w.write(out);
  return out;
}

// The GGUF reference files, one or more per architecture.
std::vector<std::string> reference_ggufs() {
  std::vector<std::string> files;
  for (const char* dir : {"reference/llamacpp/models", "reference/llamacpp2/models"}) {
    if (!fs::is_directory(shared_path(dir))) continue;
    for (const auto& entry : fs::directory_iterator(shared_path(dir))) {
      if (entry.path().extension() == ".gguf") files.push_back(entry.path().string());
    }
  }
  for (const char* file :
       {"models/stories260K/stories260K.gguf", "models/tinystories-656k/TinyStories-656K-F16.gguf",
        "models/tinystories-656k/TinyStories-656K-Q8_0.gguf",
        "models/llama2-tiny-random/llama-2-tiny-random.gguf"}) {
    if (fs::exists(shared_path(file))) files.push_back(shared_path(file));
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Reference files that rapide refuses on purpose although their architecture is supported,
// each with the part of the message that says why. They loaded before the rule and computed
// something else than the file describes.
// (None today: Llama 3.1's rope_freqs.weight is read since the rope variants landed.)
const std::vector<std::pair<std::string, std::string>> kRefusedOnPurpose = {};

const std::string* refusal_of(const std::string& path) {
  for (const auto& [file, why] : kRefusedOnPurpose) {
    if (fs::path(path).filename() == file) return &why;
  }
  return nullptr;
}

std::string architecture_of(const std::string& path) {
  return GgufFile::open(path).get_string_or("general.architecture", "");
}

// Every supported architecture's reference files (those that load as they are).
std::vector<std::string> supported_references() {
  std::vector<std::string> files;
  for (const std::string& f : reference_ggufs()) {
    if (is_supported_architecture(architecture_of(f)) && refusal_of(f) == nullptr) {
      files.push_back(f);
    }
  }
  return files;
}

TEST(StrictLoading, EveryReferenceFileThatRapideRunsStillLoads) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models");
  std::set<std::string> architectures;
  for (const std::string& path : reference_ggufs()) {
    SCOPED_TRACE(path);
    const std::string arch = architecture_of(path);
    if (const std::string* why = refusal_of(path)) {
      expect_error([&] { load_and_build(path); }, ErrorCode::kUnsupported, *why);
    } else if (is_supported_architecture(arch)) {
      EXPECT_NO_THROW(load_and_build(path));
      architectures.insert(arch);
    } else {
      expect_error([&] { load_and_build(path); }, ErrorCode::kUnsupported, "not supported");
    }
  }
  // Each architecture rapide runs has a reference file here.
  for (const std::string arch : {"llama", "qwen2", "qwen2moe", "phi3", "gemma2"}) {
    EXPECT_TRUE(architectures.contains(arch)) << arch;
  }
}

TEST(StrictLoading, SharedHuggingFaceAndLlama2cModelsStillLoad) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  EXPECT_NO_THROW(load_and_build(shared_path("models/stories260K/stories260K.bin")));
  for (const char* dir : {"models/tinystories-656k/hf", "models/tinystories-656k/hf-bf16"}) {
    SCOPED_TRACE(dir);
    if (fs::exists(shared_path(dir))) {
      EXPECT_NO_THROW(load_and_build(shared_path(dir)));
    }
  }
  // The transcriptions' classes: loaded where rapide runs them, refused by name otherwise.
  for (const char* dir : {"reference/llamacpp2/hf/qwen3", "reference/llamacpp2/hf/gemma3"}) {
    SCOPED_TRACE(dir);
    if (!fs::exists(shared_path(dir))) continue;
    const std::string config = read_text_file(shared_path(dir) + "/config.json");
    const std::string cls = nlohmann::json::parse(config)["architectures"][0];
    if (std::string(hf_architectures()).find(cls) != std::string::npos) {
      EXPECT_NO_THROW(load_and_build(shared_path(dir)));
    } else {
      expect_error([&] { load_and_build(shared_path(dir)); }, ErrorCode::kUnsupported, cls);
    }
  }
}

TEST(StrictLoading, AnExtraTensorIsRefusedByName) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models");
  const TempDir dir;
  const std::vector<std::string> files = supported_references();
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const float ones[4] = {1, 1, 1, 1};
    // One inside a layer, one beside the embedding.
    for (const std::string name : {"blk.0.attn_extra.weight", "extra_scale.weight"}) {
      const std::string copy = edited_copy(path, dir, "extra.gguf", [&](GgufWriter& w) {
        w.add_tensor(name, TensorType::kF32, {4}, ones, sizeof ones);
      });
      expect_error([&] { load_and_build(copy); }, ErrorCode::kUnsupported,
                   "tensor '" + name + "' is not used by rapide's " + architecture_of(path));
    }
  }
}

TEST(StrictLoading, AMathChangingKeyIsRefusedByName) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models");
  const TempDir dir;
  for (const std::string& path : supported_references()) {
    SCOPED_TRACE(path);
    const std::string arch = architecture_of(path);
    // Keys other architectures use and these do not implement: each changes the logits.
    for (const std::string suffix :
         {"attention.scale", "logit_scale", "rope.scaling.yarn_log_multiplier",
          "rope.scaling.attn_factor", "expert_gating_func"}) {
      if (find_known_key(arch, suffix) != nullptr) continue;  // read by this architecture
      const std::string key = arch + "." + suffix;
      const std::string copy = edited_copy(
          path, dir, "key.gguf", [&](GgufWriter& w) { w.set(key, GgufValue::f32(0.5f)); });
      expect_error([&] { load_model(copy); }, ErrorCode::kUnsupported,
                   "metadata key '" + key + "' is not known to rapide's " + arch);
    }
  }
}

// Llama 3.1's rope factors are read, never ignored: a factor tensor of the wrong length is
// refused by name, and a tensor the architecture does not read (LongRoPE's sets in a file
// without longrope scaling) too.
TEST(StrictLoading, Llama31RopeFactorsAreReadNotIgnored) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp2/models");
  const std::string path = shared_path("reference/llamacpp2/models/llama3-rope-F32.gguf");
  EXPECT_TRUE(load_model(path).config.rope_freq_factors);
  EXPECT_NO_THROW(load_and_build(path));
  const TempDir dir;
  const GgufFile in = GgufFile::open(path);
  const GgufTensorInfo* freqs = in.find_tensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  const std::string wrong =
      edited_copy(shared_path("reference/llamacpp2/models/llama3-rope-nofreqs-F32.gguf"), dir,
                  "f.gguf", [&](GgufWriter& w) {
                    w.add_tensor("rope_freqs.weight", TensorType::kF32, {16}, freqs->data, 64);
                  });
  expect_error([&] { load_and_build(wrong); }, ErrorCode::kCorrupt, "rope_freqs.weight");
}

TEST(StrictLoading, Gemma2OutputWeightIsRefused) {
  // llama.cpp's gemma2 never creates output.weight (its loader refuses such a file); rapide's
  // tied head would leave it out, so a file that has one is refused.
  RAPIDE_REQUIRE_SHARED("reference/llamacpp/models");
  const TempDir dir;
  const std::string path = shared_path("reference/llamacpp/models/gemma2-F32.gguf");
  const GgufFile in = GgufFile::open(path);
  const GgufTensorInfo* embd = in.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  const std::string copy = edited_copy(path, dir, "gemma2-head.gguf", [&](GgufWriter& w) {
    w.add_tensor("output.weight", embd->type, embd->shape, embd->data, embd->size_bytes);
  });
  expect_error([&] { load_and_build(copy); }, ErrorCode::kUnsupported,
               "tensor 'output.weight' is not used by rapide's gemma2");
}

// Keys outside `<arch>.*`: general.* and tokenizer.* are outside the rule, a split part is
// refused, another supported architecture's keys are refused, other namespaces (uploaders'
// notes) are ignored.
TEST(StrictLoading, KeyNamespaces) {
  const TempDir dir;
  auto with = [&](const std::string& key, GgufValue value) {
    GgufWriter w = testing::tiny_llama_writer();
    w.set(key, std::move(value));
    const std::string path = dir.file("ns.gguf");
    w.write(path);
    return path;
  };
  EXPECT_NO_THROW(load_and_build(with("general.anything", GgufValue::u32(1))));
  EXPECT_NO_THROW(load_and_build(with("mradermacher.quantized_by", GgufValue::string("x"))));
  EXPECT_NO_THROW(load_and_build(with("quantize.imatrix.file", GgufValue::string("x"))));
  EXPECT_NO_THROW(load_and_build(with("split.count", GgufValue::u16(1))));
  expect_error([&] { load_model(with("split.count", GgufValue::u16(3))); }, ErrorCode::kUnsupported,
               "split.count = 3");
  expect_error([&] { load_model(with("qwen2.rope.freq_base", GgufValue::f32(1e6f))); },
               ErrorCode::kUnsupported, "'qwen2.rope.freq_base' belongs to architecture qwen2");
  expect_error([&] { load_model(with("llama.attention.causal", GgufValue::boolean(false))); },
               ErrorCode::kUnsupported, "metadata key 'llama.attention.causal'");
  // Known keys whose values rapide does not compute are refused by their readers.
  expect_error([&] { load_model(with("llama.rope.scaling.type", GgufValue::string("dynamic"))); },
               ErrorCode::kUnsupported, "rope scaling type 'dynamic'");
  expect_error([&] { load_model(with("llama.attention.value_length", GgufValue::u32(8))); },
               ErrorCode::kUnsupported, "attention.value_length 8");
  // As llama.cpp: no type means linear, whose factor then applies; "none" never scales.
  EXPECT_EQ(load_model(with("llama.rope.scaling.factor", GgufValue::f32(4))).config.rope_scale,
            4.0f);
  GgufWriter none = testing::tiny_llama_writer();
  none.set("llama.rope.scaling.type", GgufValue::string("none"));
  none.set("llama.rope.scaling.factor", GgufValue::f32(4));
  none.write(dir.file("none.gguf"));
  EXPECT_EQ(load_model(dir.file("none.gguf")).config.rope_scale, 1.0f);
}

// A pipeline stage checks only what it took: another stage's layers are its business.
TEST(StrictLoading, TensorScopeOfAPipelineStage) {
  ModelFile m;
  m.path = "m";
  m.format = "gguf";
  m.config.architecture = "llama";
  m.config.n_layers = 2;
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.attn_q.weight"}) {
    m.tensors.push_back({name, TensorType::kF32, {1}, nullptr, 0});
  }
  m.get("blk.0.attn_q.weight");
  EXPECT_NO_THROW(refuse_unused_tensors(m, {0, 1, false}));
  expect_error(
      [&] {
        refuse_unused_tensors(m, {0, 1, true});
      },
      ErrorCode::kUnsupported, "tensor 'token_embd.weight'");
  expect_error(
      [&] {
        refuse_unused_tensors(m, {1, 1, false});
      },
      ErrorCode::kUnsupported, "tensor 'blk.1.attn_q.weight'");
  // A layer past the file's block count belongs to no stage.
  m.tensors.push_back({"blk.7.attn_q.weight", TensorType::kF32, {1}, nullptr, 0});
  expect_error(
      [&] {
        refuse_unused_tensors(m, {0, 1, false});
      },
      ErrorCode::kUnsupported, "tensor 'blk.7.attn_q.weight'");
}

TEST(StrictLoading, HuggingFaceConfigKeys) {
  const std::string common =
      R"("hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "vocab_size": 16)";
  auto config = [&](const std::string& cls, const std::string& extra) {
    return config_from_hf_json(R"({"architectures": [")" + cls + R"("], )" + common +
                                   (extra.empty() ? "" : ", ") + extra + "}",
                               "m");
  };
  EXPECT_NO_THROW(config("LlamaForCausalLM", R"("torch_dtype": "bfloat16", "use_cache": true)"));
  for (const std::string cls : {"LlamaForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM",
                                "Gemma2ForCausalLM", "MistralForCausalLM"}) {
    SCOPED_TRACE(cls);
    expect_error([&] { config(cls, R"("quantization_config": {"bits": 4})"); },
                 ErrorCode::kUnsupported, "config.json key 'quantization_config'");
    expect_error([&] { config(cls, R"("logit_scale": 0.25)"); }, ErrorCode::kUnsupported,
                 "config.json key 'logit_scale' is not known to rapide's " + cls);
  }
  expect_error([&] { config("LlamaForCausalLM", R"("final_logit_softcapping": 30.0)"); },
               ErrorCode::kUnsupported, "'final_logit_softcapping'");
  expect_error(
      [&] {
        config("LlamaForCausalLM", R"("rope_scaling": {"rope_type": "dynamic", "factor": 8})");
      },
      ErrorCode::kUnsupported, "rope_scaling type 'dynamic'");
  expect_error([&] { config("LlamaForCausalLM", R"("hidden_act": "gelu")"); },
               ErrorCode::kUnsupported, "hidden_act \"gelu\"");
  expect_error([&] { config("Qwen2ForCausalLM", R"("use_sliding_window": true)"); },
               ErrorCode::kUnsupported, "use_sliding_window");
  expect_error([&] { config("Gemma2ForCausalLM", R"("tie_word_embeddings": false)"); },
               ErrorCode::kUnsupported, "tie_word_embeddings false");
  EXPECT_NO_THROW(config("Gemma2ForCausalLM", R"("tie_word_embeddings": true)"));
}

// LongRoPE's two factor sets: the one a run does not rotate with may be left out, but only
// when the Model took the other.
TEST(StrictLoading, OneOfTwoAlternativesMayBeLeftOut) {
  ModelFile m;
  m.path = "phi3";
  m.format = "gguf";
  m.config.architecture = "phi3";
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    m.tensors.push_back({name, TensorType::kF32, {1}, nullptr, 0});
  }
  expect_error(
      [&] {
        refuse_unused_tensors(m, {0, 0, true});
      },
      ErrorCode::kUnsupported, "tensor 'rope_factors_long.weight'");
  m.get("rope_factors_short.weight");
  EXPECT_NO_THROW(refuse_unused_tensors(m, {0, 0, true}));
}

TEST(StrictLoading, IgnoreListPatterns) {
  const char* inv_freq = "model.layers.12.self_attn.rotary_emb.inv_freq";
  EXPECT_NE(ignored_tensor_reason("hf", "llama", inv_freq), nullptr);
  EXPECT_EQ(ignored_tensor_reason("gguf", "llama", inv_freq), nullptr);
  EXPECT_EQ(ignored_tensor_reason("hf", "llama", "model.layers.x.self_attn.rotary_emb.inv_freq"),
            nullptr);
  EXPECT_EQ(ignored_tensor_reason("hf", "llama", "model.layers.1.self_attn.rotary_emb.inv_freq.b"),
            nullptr);
  EXPECT_EQ(ignored_tensor_reason("hf", "llama", "model.layers.1.self_attn.rotary_emb"), nullptr);
}

// One row per key and architecture: two rows for one key must list disjoint architectures,
// or the first would silently win.
TEST(StrictLoading, TablesHaveOneRowPerKeyAndArchitecture) {
  const auto overlap = [](std::string_view a, std::string_view b) {
    if (a == "*" || b == "*") return true;
    size_t start = 0;
    while (start < a.size()) {
      const size_t end = std::min(a.find(' ', start), a.size());
      if (architecture_listed(b, a.substr(start, end - start))) return true;
      start = end + 1;
    }
    return false;
  };
  const auto gguf = known_gguf_keys();
  for (size_t i = 0; i < gguf.size(); ++i) {
    for (size_t j = i + 1; j < gguf.size(); ++j) {
      EXPECT_FALSE(gguf[i].suffix == gguf[j].suffix &&
                   overlap(gguf[i].architectures, gguf[j].architectures))
          << gguf[i].suffix;
    }
  }
  const auto hf = known_hf_config_keys();
  for (size_t i = 0; i < hf.size(); ++i) {
    for (size_t j = i + 1; j < hf.size(); ++j) {
      EXPECT_FALSE(hf[i].key == hf[j].key && overlap(hf[i].classes, hf[j].classes)) << hf[i].key;
    }
  }
}

// Every key and tensor the tables know is in docs/architectures.md.
TEST(StrictLoading, TheDocumentationListsEveryTableRow) {
  const std::string doc = read_text_file(testing::test_data_path("../../docs/architectures.md"));
  for (const KnownKey& k : known_gguf_keys()) {
    EXPECT_NE(doc.find(fmt::format("`{}`", k.suffix)), std::string::npos) << k.suffix;
  }
  for (const HfConfigKey& k : known_hf_config_keys()) {
    EXPECT_NE(doc.find(fmt::format("`{}`", k.key)), std::string::npos) << k.key;
  }
}

}  // namespace
}  // namespace rapide
