// `rapide synth` and `rapide inspect` end to end through the binary (a missing binary
// follows RAPIDE_MISSING_PREREQUISITE: fails in CI, skips elsewhere).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "formats/gguf_reader.h"
#include "formats/model_file.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

// Runs a command, returning its exit status and standard output.
int run(const std::string& command, std::string* out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  return ::pclose(pipe);
}

std::string binary_or_skip() {
  const std::string binary = testing::rapide_binary();
  if (binary.empty() || !std::filesystem::exists(binary)) return "";
  return binary;
}

TEST(Cli, SynthWritesALoadableRandomModel) {
  RAPIDE_REQUIRE_SHARED("models/llama2-tiny-random");
  const std::string rapide = binary_or_skip();
  if (rapide.empty()) RAPIDE_MISSING_PREREQUISITE("rapide binary not built");
  testing::TempDir dir;
  const std::string vocab =
      testing::shared_path("models/llama2-tiny-random/llama-2-tiny-random.gguf");
  for (const char* type : {"q8_0", "q4_0", "f16"}) {
    SCOPED_TRACE(type);
    const std::string file = dir.file(std::string(type) + ".gguf");
    std::string out;
    ASSERT_EQ(
        run(rapide + " synth --shape dim=64,layers=2,heads=4,kv_heads=2,ffn=128,ctx=256 --type " +
                type + " --vocab-from " + vocab + " -o " + file + " --seed 7 2>/dev/null",
            &out),
        0)
        << out;
    const ModelFile m = load_model(file);
    EXPECT_EQ(m.config.dim, 64);
    EXPECT_EQ(m.config.n_layers, 2);
    EXPECT_EQ(m.config.n_kv_heads, 2);
    EXPECT_EQ(m.config.ffn_dim, 128);
    EXPECT_EQ(m.config.max_context, 256);
    EXPECT_EQ(m.config.vocab_size, 32000);
    EXPECT_FALSE(m.config.tied_embeddings);
    EXPECT_EQ(m.tokenizer.tokens.size(), 32000u);
    EXPECT_EQ(std::string(tensor_type_name(m.get("blk.1.ffn_down.weight").type)), type);
    EXPECT_EQ(m.get("output_norm.weight").type, TensorType::kF32);
    float norm;
    std::memcpy(&norm, m.get("output_norm.weight").data, 4);
    EXPECT_EQ(norm, 1.0f);
  }
  std::string out;
  EXPECT_NE(run(rapide + " synth --shape dim=bad --vocab-from " + vocab + " -o " +
                    dir.file("x.gguf") + " 2>&1",
                &out),
            0);
  EXPECT_NE(out.find("--shape"), std::string::npos) << out;
}

// Every quantized type synth can write loads back with that type on its matrices; a
// 256-weight k-quant needs dim and ffn to be multiples of 256.
TEST(Cli, SynthWritesEveryQuantizedType) {
  const std::string rapide = binary_or_skip();
  if (rapide.empty()) GTEST_SKIP() << "rapide binary not built";
  testing::TempDir dir;
  const std::string vocab = testing::shared_path("models/stories260K/stories260K.gguf");
  for (const char* type :
       {"q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"}) {
    SCOPED_TRACE(type);
    const std::string file = dir.file(std::string(type) + ".gguf");
    std::string out;
    ASSERT_EQ(
        run(rapide + " synth --shape dim=256,layers=1,heads=4,kv_heads=2,ffn=512,ctx=64 --type " +
                type + " --vocab-from " + vocab + " -o " + file + " 2>/dev/null",
            &out),
        0)
        << out;
    const ModelFile m = load_model(file);
    EXPECT_EQ(std::string(tensor_type_name(m.get("blk.0.ffn_down.weight").type)), type);
    EXPECT_EQ(std::string(tensor_type_name(m.get("output.weight").type)), type);
  }
  std::string out;
  EXPECT_NE(run(rapide + " synth --shape dim=64,layers=1,heads=4,kv_heads=2,ffn=128,ctx=64 " +
                    "--type Q4_K --vocab-from " + vocab + " -o " + dir.file("x.gguf") + " 2>&1",
                &out),
            0);
  EXPECT_NE(out.find("multiples of 256"), std::string::npos) << out;
}

TEST(Cli, InspectDescribesModels) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const std::string rapide = binary_or_skip();
  if (rapide.empty()) RAPIDE_MISSING_PREREQUISITE("rapide binary not built");
  std::string out;
  ASSERT_EQ(run(rapide + " inspect --json " +
                    testing::shared_path("models/tinystories-656k/TinyStories-656K-Q8_0.gguf"),
                &out),
            0);
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["format"], "gguf");
  EXPECT_EQ(j["config"]["dim"], 128);
  EXPECT_EQ(j["tokenizer"]["bos"]["text"], "<|start_story|>");
  EXPECT_EQ(j["tensors"].size(), 20u);
  EXPECT_EQ(j["config"]["window_layers"], "none");
  out.clear();
  // The block description: gemma2's window on even layers frees nothing, its soft-caps.
  const std::string gemma2 = "reference/llamacpp/models/gemma2-F32.gguf";
  if (std::filesystem::exists(testing::shared_path(gemma2))) {
    ASSERT_EQ(run(rapide + " inspect " + testing::shared_path(gemma2), &out), 0);
    EXPECT_NE(out.find("sliding window 32 on even layers\n"), std::string::npos) << out;
    EXPECT_NE(out.find("soft-caps: attention 20  final 10"), std::string::npos) << out;
    out.clear();
    ASSERT_EQ(run(rapide + " inspect --json " +
                      testing::shared_path("reference/llamacpp/models/qwen2moe-F32.gguf"),
                  &out),
              0);
    const nlohmann::json moe = nlohmann::json::parse(out);
    EXPECT_EQ(moe["config"]["n_experts"], 4);
    EXPECT_EQ(moe["config"]["n_experts_used"], 2);
    out.clear();
  }
  ASSERT_EQ(
      run(rapide + " inspect " + testing::shared_path("models/stories260K/stories260K.bin"), &out),
      0);
  EXPECT_NE(out.find("llama2c"), std::string::npos) << out;
  EXPECT_NE(out.find("blk.4.ffn_up.weight"), std::string::npos);
  EXPECT_NE(out.find("bos 1 \"<s>\""), std::string::npos) << out;
  out.clear();
  EXPECT_NE(run(rapide + " inspect /nonexistent 2>&1", &out), 0);
  EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
}

}  // namespace
}  // namespace rapide
