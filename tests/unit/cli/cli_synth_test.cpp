// `rapide synth --arch` end to end through the real binary, on tiny shapes: each architecture's
// file has the keys and tensors llama.cpp's loader reads for it (deepseek2: exactly those of the
// llama.cpp reference file shared/reference/llamacpp2/models/deepseek2-F32.gguf, whose shape the
// test asks for), rapide loads each file as its architecture and generates from it, and `--arch
// llama` still writes the bytes it wrote before --arch existed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "formats/gguf_reader.h"
#include "formats/model_file.h"
#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const char* kVocab = "models/stories260K/stories260K.gguf";  // 512 tokens

class CliSynth : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kVocab);
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_synth_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string out(const std::string& name) const { return (dir_ / name).string(); }

  // Runs `rapide synth ARGS --vocab-from stories260K -o NAME`; returns the file's path.
  std::string synth(const std::string& args, const std::string& name) {
    const std::string path = out(name);
    const CliResult r =
        run_rapide("synth " + args + " --vocab-from " + shared_path(kVocab) + " -o " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return path;
  }

  std::filesystem::path dir_;
};

using Shape = std::vector<int64_t>;

void expect_tensor(const GgufFile& f, const std::string& name, const Shape& shape) {
  const GgufTensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name << " missing";
  EXPECT_EQ(t->shape, shape) << name;
}

// `rapide run` greedy on the file: it loads and generates.
void expect_generates(const std::string& path) {
  const CliResult r = run_rapide("run -m " + path + " -p 'Once upon a time' -n 8 --temp 0 -t 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
}

uint64_t fnv1a(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

TEST_F(CliSynth, LlamaIsTheFileSynthAlwaysWrote) {
  const std::string shape = "--shape dim=64,layers=2,heads=4,kv_heads=2,ffn=128,ctx=256 --seed 7";
  const std::string plain = synth(shape, "plain.gguf");
  const std::string llama = synth("--arch llama " + shape, "llama.gguf");
  // FNV-1a of the file the commit before --arch wrote for this command.
  EXPECT_EQ(fnv1a(plain), 0x2f53d7aca4a221e6ull);
  EXPECT_EQ(fnv1a(llama), fnv1a(plain));
}

TEST_F(CliSynth, Qwen3HasPerHeadNormsAndAnUntiedHead) {
  const GgufFile f = GgufFile::open(
      synth("--arch qwen3 --shape dim=64,layers=2,heads=4,kv_heads=2,head_dim=32,ffn=128,ctx=256",
            "qwen3.gguf"));
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_u32("qwen3.embedding_length"), 64u);
  EXPECT_EQ(f.get_u32("qwen3.block_count"), 2u);
  EXPECT_EQ(f.get_u32("qwen3.context_length"), 256u);
  EXPECT_EQ(f.get_u32("qwen3.feed_forward_length"), 128u);
  EXPECT_EQ(f.get_u32("qwen3.attention.head_count"), 4u);
  EXPECT_EQ(f.get_u32("qwen3.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_u32("qwen3.attention.key_length"), 32u);
  EXPECT_EQ(f.get_u32("qwen3.attention.value_length"), 32u);
  EXPECT_EQ(f.get_f32("qwen3.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.get_f32("qwen3.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(f.tensors().size(), 1u + 2u * 11u + 2u);
  expect_tensor(f, "token_embd.weight", {64, 512});
  for (const std::string b : {"blk.0.", "blk.1."}) {
    expect_tensor(f, b + "attn_norm.weight", {64});
    expect_tensor(f, b + "attn_q.weight", {64, 128});  // 4 heads of 32: wider than dim
    expect_tensor(f, b + "attn_k.weight", {64, 64});
    expect_tensor(f, b + "attn_v.weight", {64, 64});
    expect_tensor(f, b + "attn_output.weight", {128, 64});
    expect_tensor(f, b + "attn_q_norm.weight", {32});
    expect_tensor(f, b + "attn_k_norm.weight", {32});
    expect_tensor(f, b + "ffn_norm.weight", {64});
    expect_tensor(f, b + "ffn_gate.weight", {64, 128});
    expect_tensor(f, b + "ffn_up.weight", {64, 128});
    expect_tensor(f, b + "ffn_down.weight", {128, 64});
  }
  expect_tensor(f, "output_norm.weight", {64});
  expect_tensor(f, "output.weight", {64, 512});

  const ModelFile m = load_model(f.path());
  EXPECT_EQ(m.config.architecture, "qwen3");
  EXPECT_EQ(m.config.head_dim, 32);
  EXPECT_EQ(m.config.qk_norm, QkNorm::kPerHead);
  EXPECT_EQ(m.config.rope_style, RopeStyle::kNeox);
  EXPECT_FALSE(m.config.tied_embeddings);
  expect_generates(f.path());
}

TEST_F(CliSynth, Gemma3HasSandwichNormsAWindowAndATiedHead) {
  const GgufFile f = GgufFile::open(
      synth("--arch gemma3 --shape "
            "dim=64,layers=6,heads=2,kv_heads=1,head_dim=32,ffn=64,ctx=256,window=16,rope_scale=8",
            "gemma3.gguf"));
  EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(f.get_u32("gemma3.embedding_length"), 64u);
  EXPECT_EQ(f.get_u32("gemma3.block_count"), 6u);
  EXPECT_EQ(f.get_u32("gemma3.attention.head_count"), 2u);
  EXPECT_EQ(f.get_u32("gemma3.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.get_u32("gemma3.attention.key_length"), 32u);
  EXPECT_EQ(f.get_u32("gemma3.attention.value_length"), 32u);
  EXPECT_EQ(f.get_u32("gemma3.attention.sliding_window"), 16u);
  EXPECT_EQ(f.get_f32("gemma3.rope.freq_base"), 1e6f);
  EXPECT_EQ(f.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(f.get_f32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_EQ(f.get_f32("gemma3.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(f.tensors().size(), 1u + 6u * 13u + 1u);
  expect_tensor(f, "token_embd.weight", {64, 512});
  for (int l = 0; l < 6; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* norm : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"}) {
      expect_tensor(f, b + norm + ".weight", {64});
    }
    expect_tensor(f, b + "attn_q.weight", {64, 64});
    expect_tensor(f, b + "attn_k.weight", {64, 32});
    expect_tensor(f, b + "attn_v.weight", {64, 32});
    expect_tensor(f, b + "attn_output.weight", {64, 64});
    expect_tensor(f, b + "attn_q_norm.weight", {32});
    expect_tensor(f, b + "attn_k_norm.weight", {32});
    expect_tensor(f, b + "ffn_gate.weight", {64, 64});
    expect_tensor(f, b + "ffn_up.weight", {64, 64});
    expect_tensor(f, b + "ffn_down.weight", {64, 64});
  }
  expect_tensor(f, "output_norm.weight", {64});
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr) << "gemma3's output head is token_embd";
  // Norms are stored as llama.cpp's converter stores Gemma's (1 + w): about 1.
  const GgufTensorInfo* norm = f.find_tensor("blk.0.post_ffw_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(norm->data)[0], 1.0f);
  const ModelFile m = load_model(f.path());
  EXPECT_EQ(m.config.architecture, "gemma3");
  EXPECT_EQ(m.config.head_dim, 32);
  EXPECT_EQ(m.config.qk_norm, QkNorm::kPerHead);
  EXPECT_TRUE(m.config.post_norms);
  EXPECT_TRUE(m.config.tied_embeddings);
  EXPECT_EQ(m.config.sliding_window, 16);
  EXPECT_FALSE(m.config.windowed(5));  // the sixth layer is global
  EXPECT_EQ(m.config.rope_scale, 8.0f);
  expect_generates(f.path());
  // Without rope_scale there are no scaling keys (as Gemma 3 1B).
  const GgufFile plain = GgufFile::open(synth(
      "--arch gemma3 --shape dim=64,layers=1,heads=2,kv_heads=1,ffn=64,ctx=64", "gemma3b.gguf"));
  EXPECT_FALSE(plain.has("gemma3.rope.scaling.type"));
  EXPECT_EQ(plain.get_u32("gemma3.attention.key_length"), 32u);  // dim / heads
  EXPECT_EQ(plain.get_u32("gemma3.attention.sliding_window"), 512u);
}

// The shape of the llama.cpp reference file: every key (but the name) and every tensor (name,
// shape, order) as gguf-py wrote them there.
TEST_F(CliSynth, Deepseek2MatchesTheLlamaCppReferenceLayout) {
  const char* kReference = "reference/llamacpp2/models/deepseek2-F32.gguf";
  RAPIDE_REQUIRE_SHARED(kReference);
  const GgufFile f = GgufFile::open(
      synth("--arch deepseek2 --type f32 --shape "
            "dim=64,layers=3,heads=2,ffn=128,ctx=256,q_lora=32,kv_lora=32,nope=16,rope=16,v_dim="
            "24,experts=4,experts_used=2,expert_ffn=32,shared_experts=2,dense_layers=1",
            "deepseek2.gguf"));
  const GgufFile ref = GgufFile::open(shared_path(kReference));
  for (const GgufKeyValue& kv : ref.metadata()) {
    if (kv.key.starts_with("tokenizer.") || kv.key == "general.name") continue;
    const GgufValue* got = f.find(kv.key);
    ASSERT_NE(got, nullptr) << kv.key << " missing";
    EXPECT_EQ(got->type, kv.value.type) << kv.key;
    EXPECT_EQ(got->to_string(), kv.value.to_string()) << kv.key;
  }
  ASSERT_EQ(f.tensors().size(), ref.tensors().size());
  for (size_t i = 0; i < ref.tensors().size(); ++i) {
    EXPECT_EQ(f.tensors()[i].name, ref.tensors()[i].name) << i;
    EXPECT_EQ(f.tensors()[i].shape, ref.tensors()[i].shape) << ref.tensors()[i].name;
    EXPECT_EQ(f.tensors()[i].type, ref.tensors()[i].type) << ref.tensors()[i].name;
  }
  const ModelFile m = load_model(f.path());
  EXPECT_TRUE(m.config.mla());
  EXPECT_EQ(m.config.q_lora_rank, 32);
  EXPECT_EQ(m.config.mla_v_dim, 24);
  EXPECT_EQ(m.config.leading_dense_layers, 1);
  EXPECT_EQ(m.config.expert_gating, ExpertGating::kSigmoid);
  EXPECT_TRUE(m.config.expert_selection_bias);
  expect_generates(f.path());
}

// The synth100m-sized default (cut to 2 layers, the dense one and one MoE layer, to stay
// small): its MLA cache row against the expanded K/V, and the tensors' types.
TEST_F(CliSynth, Deepseek2Synth100mShapeAndItsCacheRow) {
  const std::string path = out("ds.gguf");
  const CliResult r =
      run_rapide("synth --arch deepseek2 --type q8_0 --shape layers=2 --vocab-from " +
                 shared_path(kVocab) + " -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // 2 layers of kv_lora 256 + rope 64 cached, against 12 heads of (192 + 128) expanded.
  EXPECT_NE(r.out.find("K/V: 640 values a position (7680 with K and V expanded per head)"),
            std::string::npos)
      << r.out;
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_u32("deepseek2.expert_count"), 8u);
  EXPECT_EQ(f.get_u32("deepseek2.expert_used_count"), 2u);
  EXPECT_EQ(f.get_u32("deepseek2.leading_dense_block_count"), 1u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.key_length"), 192u);
  EXPECT_EQ(f.get_u32("deepseek2.attention.value_length"), 128u);
  EXPECT_EQ(f.get_u32("deepseek2.rope.dimension_count"), 64u);
  expect_tensor(f, "blk.0.ffn_gate.weight", {768, 2048});
  expect_tensor(f, "blk.0.attn_q_b.weight", {256, 12 * 192});
  expect_tensor(f, "blk.0.attn_kv_a_mqa.weight", {768, 256 + 64});
  expect_tensor(f, "blk.0.attn_kv_b.weight", {256, 12 * (128 + 128)});
  expect_tensor(f, "blk.1.ffn_gate_exps.weight", {768, 512, 8});
  expect_tensor(f, "blk.1.ffn_down_shexp.weight", {512, 768});
  EXPECT_EQ(f.find_tensor("blk.1.ffn_gate_inp.weight")->type, TensorType::kF32);
  EXPECT_EQ(f.find_tensor("blk.1.exp_probs_b.bias")->type, TensorType::kF32);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_down_exps.weight")->type, TensorType::kQ8_0);
  expect_generates(path);
}

TEST_F(CliSynth, BadArchAndShapesFailClearly) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--arch mistral", "--arch 'mistral'"},
           {"--arch llama --shape head_dim=32", "--shape"},
           {"--arch qwen3 --shape window=16", "head_dim"},  // lists the keys qwen3 takes
           {"--arch deepseek2 --shape kv_heads=2", "q_lora"},
           {"--arch deepseek2 --shape experts=2,experts_used=3", "experts_used"},
           {"--arch qwen3 --shape heads=12,kv_heads=5", "kv_heads must divide heads"},
           {"--arch deepseek2 --shape q_lora=384 --type q4_K", "multiples of 256"},
       }) {
    SCOPED_TRACE(c.args);
    const CliResult r = run_rapide("synth " + c.args + " --vocab-from " + shared_path(kVocab) +
                                   " -o " + out("bad.gguf"));
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out("bad.gguf")));
  }
}

}  // namespace
}  // namespace rapide::testing
