// `rapide quantize` end to end through the real binary, against llama.cpp's own llama-quantize
// outputs of one small model (shared/reference/llamacpp/models): the single types give the
// same tensor bytes as `llama-quantize --pure`, Q4_K_M picks llama-quantize's type for every
// tensor, the output runs, and bad input fails with a clear error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "formats/gguf_reader.h"
#include "formats/quant_plan.h"
#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const char* kModels = "reference/llamacpp/models/";

class CliQuantize : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(std::string(kModels) + "llama-q-F32.gguf");
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_quantize_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string source() const { return shared_path(std::string(kModels) + "llama-q-F32.gguf"); }
  std::string out(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(CliQuantize, SingleTypesMatchLlamaQuantizePure) {
  for (const char* type : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}) {
    SCOPED_TRACE(type);
    const std::string ref_path = shared_path(std::string(kModels) + "llama-q-" + type + ".gguf");
    const std::string path = out(std::string(type) + ".gguf");
    const CliResult r = run_rapide("quantize " + source() + " " + path + " --type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const GgufFile got = GgufFile::open(path), ref = GgufFile::open(ref_path);
    ASSERT_EQ(got.tensors().size(), ref.tensors().size());
    for (const GgufTensorInfo& want : ref.tensors()) {
      const GgufTensorInfo* t = got.find_tensor(want.name);
      ASSERT_NE(t, nullptr) << want.name;
      EXPECT_EQ(t->type, want.type) << want.name;
      EXPECT_EQ(t->shape, want.shape) << want.name;
      ASSERT_EQ(t->size_bytes, want.size_bytes) << want.name;
      EXPECT_EQ(std::memcmp(t->data, want.data, want.size_bytes), 0) << want.name;
    }
    EXPECT_EQ(got.get_string("tokenizer.ggml.model"), ref.get_string("tokenizer.ggml.model"));
    EXPECT_EQ(got.get_array("tokenizer.ggml.tokens").items.size(),
              ref.get_array("tokenizer.ggml.tokens").items.size());
  }
}

TEST_F(CliQuantize, Q4KMChoosesLlamaQuantizesTypesAndRuns) {
  RAPIDE_REQUIRE_SHARED(std::string(kModels) + "llama-q-Q4_K_M.gguf");
  const std::string path = out("Q4_K_M.gguf");
  const CliResult r = run_rapide("quantize " + source() + " " + path + " --type q4_k_m");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const GgufFile got = GgufFile::open(path);
  const GgufFile ref = GgufFile::open(shared_path(std::string(kModels) + "llama-q-Q4_K_M.gguf"));
  ASSERT_EQ(got.tensors().size(), ref.tensors().size());
  for (const GgufTensorInfo& want : ref.tensors()) {
    const GgufTensorInfo* t = got.find_tensor(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(tensor_type_name(t->type), tensor_type_name(want.type)) << want.name;
  }
  EXPECT_EQ(got.get_u32("general.file_type"), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M

  const CliResult ran = run_rapide("run -m " + path + " -p 'Once upon a time' -n 8 --temp 0 -t 2");
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
}

TEST_F(CliQuantize, KQuantSingleTypesAndPresetsLoadAndRun) {
  for (const char* type : {"q6_K", "iq4_xs", "Q5_K_M", "Q3_K_M", "Q4_K_S", "Q5_K_S"}) {
    SCOPED_TRACE(type);
    const std::string path = out(std::string(type) + ".gguf");
    const CliResult r = run_rapide("quantize " + source() + " " + path + " --type " + type);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const CliResult ran =
        run_rapide("run -m " + path + " -p 'Once upon a time' -n 4 --temp 0 -t 2");
    EXPECT_EQ(ran.exit_code, 0) << ran.out;
  }
}

TEST_F(CliQuantize, ClearErrors) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"quantize " + source() + " " + out("x.gguf") + " --type q7_0", "use one of"},
      {"quantize " + source() + " " + source() + " --type q8_0", "same file"},
      {"quantize " + out("missing.gguf") + " " + out("x.gguf") + " --type q8_0", "missing.gguf"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_rapide(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(out("x.gguf")));
}

// The role rules themselves, on a 32-layer shape (the reference model is too small to reach
// every branch of use_more_bits).
TEST(QuantPlan, Q4KMRolesOnThirtyTwoLayers) {
  const QuantPlan plan = *parse_quant_plan("Q4_K_M");
  const QuantModelFacts facts{.n_attn_v = 32, .n_ffn_down = 32};
  const std::vector<int64_t> shape{4096, 4096};
  auto type = [&](const std::string& name, int layer) {
    return choose_tensor_type(name, shape, layer, plan, facts);
  };
  EXPECT_EQ(type("output.weight", -1), TensorType::kQ6_K);
  EXPECT_EQ(type("token_embd.weight", -1), TensorType::kQ4_K);
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  EXPECT_EQ(type("blk.0.attn_v.weight", 0), TensorType::kQ6_K);
  EXPECT_EQ(type("blk.4.attn_v.weight", 4), TensorType::kQ4_K);
  EXPECT_EQ(type("blk.6.ffn_down.weight", 6), TensorType::kQ6_K);
  EXPECT_EQ(type("blk.7.ffn_down.weight", 7), TensorType::kQ4_K);
  EXPECT_EQ(type("blk.31.ffn_down.weight", 31), TensorType::kQ6_K);
  EXPECT_EQ(type("blk.7.attn_q.weight", 7), TensorType::kQ4_K);
  // Rows that are not whole super-blocks fall back as llama.cpp does.
  EXPECT_EQ(choose_tensor_type("blk.5.attn_q.weight", {96, 96}, 5, plan, facts), TensorType::kQ5_0);
  EXPECT_EQ(choose_tensor_type("output.weight", {96, 100}, -1, plan, facts), TensorType::kQ8_0);
  EXPECT_EQ(choose_tensor_type("blk.5.attn_q.weight", {40, 96}, 5, plan, facts), TensorType::kF16);
  // Tied embeddings: token_embd is the output matrix too.
  const QuantModelFacts tied{.n_attn_v = 32, .n_ffn_down = 32, .has_output = false};
  EXPECT_EQ(choose_tensor_type("token_embd.weight", shape, -1, plan, tied), TensorType::kQ6_K);
  // Q3_K_M: attn_v Q5_K on the first two layers, attn_output and ffn_down Q4_K.
  const QuantPlan q3 = *parse_quant_plan("q3_k_m");
  EXPECT_EQ(choose_tensor_type("blk.1.attn_v.weight", shape, 1, q3, facts), TensorType::kQ5_K);
  EXPECT_EQ(choose_tensor_type("blk.2.attn_v.weight", shape, 2, q3, facts), TensorType::kQ4_K);
  EXPECT_EQ(choose_tensor_type("blk.9.attn_output.weight", shape, 9, q3, facts), TensorType::kQ4_K);
  EXPECT_EQ(choose_tensor_type("blk.1.ffn_down.weight", shape, 1, q3, facts), TensorType::kQ5_K);
  EXPECT_EQ(choose_tensor_type("blk.9.ffn_up.weight", shape, 9, q3, facts), TensorType::kQ3_K);
  EXPECT_FALSE(parse_quant_plan("q7_0").has_value());
  EXPECT_EQ(parse_quant_plan("q4_0")->preset, QuantPreset::kPure);
}

}  // namespace
}  // namespace rapide::testing
