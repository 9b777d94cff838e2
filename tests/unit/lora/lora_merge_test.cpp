// merge_lora (lora/lora_merge.h) against llama-export-lora's merged files (the sha256 of their
// merged matrices in tests/data/lora): the same matrices, bit for bit, logits matching llama.cpp's
// for its merged model, the PEFT form merging to the same bytes as the GGUF form; and `rapide lora
// merge` through the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "formats/gguf_reader.h"
#include "golden/llamacpp_reference.h"
#include "golden/logits_compare.h"
#include "lora/lora_merge.h"
#include "lora_test_util.h"
#include "run_rapide.h"
#include "unit/formats/formats_test_util.h"

namespace rapide::testing {
namespace {

class LoraMerge : public ::testing::Test {
 protected:
  void SetUp() override { RAPIDE_REQUIRE_SHARED(kBaseModel); }
  TempDir dir_;
};

// The largest |difference| between two GGUFs' F32 matrices of one name (the files must hold
// the same names, types and shapes), over the adapted matrices or over the others.
float max_tensor_diff(const GgufFile& x, const GgufFile& y, bool adapted) {
  float worst = 0;
  EXPECT_EQ(x.tensors().size(), y.tensors().size());
  for (const GgufTensorInfo& t : x.tensors()) {
    const GgufTensorInfo* u = y.find_tensor(t.name);
    if (u == nullptr) {
      ADD_FAILURE() << t.name << " missing";
      continue;
    }
    EXPECT_EQ(t.type, u->type) << t.name;
    EXPECT_EQ(t.shape, u->shape) << t.name;
    const bool is_adapted =
        t.name.find("attn_q") != std::string::npos || t.name.find("attn_k") != std::string::npos ||
        t.name.find("attn_v") != std::string::npos ||
        t.name.find("attn_output") != std::string::npos || t.name.find("ffn_") != std::string::npos;
    if (t.name.find("norm") != std::string::npos || is_adapted != adapted) continue;
    const size_t n = t.size_bytes / 4;
    std::vector<float> a(n), b(n);
    std::memcpy(a.data(), t.data, t.size_bytes);
    std::memcpy(b.data(), u->data, u->size_bytes);
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

// What tests/data/lora/merged-adapted-tensors.sha256 records for `name`: the sha256 of
// llama-export-lora's merged matrices (the file is not kept: 3.4 MB a scale).
std::string recorded_sha256(const std::string& name) {
  std::FILE* f = std::fopen(lora_path("merged-adapted-tensors.sha256").c_str(), "r");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return {};
  char hash[65] = {0}, label[256] = {0};
  std::string found;
  while (std::fscanf(f, "%64s %255s", hash, label) == 2) {
    if (std::string(label) == name) found = hash;
  }
  std::fclose(f);
  EXPECT_FALSE(found.empty()) << name;
  return found;
}

// sha256 of the adapted matrices' bytes, concatenated in name order (written to `scratch`
// and read by coreutils' sha256sum).
std::string adapted_tensors_sha256(const GgufFile& file, const std::string& scratch) {
  std::vector<const GgufTensorInfo*> adapted;
  for (const GgufTensorInfo& t : file.tensors()) {
    const bool is_adapted =
        t.name.find("attn_q") != std::string::npos || t.name.find("attn_k") != std::string::npos ||
        t.name.find("attn_v") != std::string::npos ||
        t.name.find("attn_output") != std::string::npos || t.name.find("ffn_") != std::string::npos;
    if (is_adapted && t.name.find("norm") == std::string::npos) adapted.push_back(&t);
  }
  std::sort(adapted.begin(), adapted.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->name < b->name; });
  std::FILE* out = std::fopen(scratch.c_str(), "wb");
  EXPECT_NE(out, nullptr);
  if (out == nullptr) return {};
  for (const GgufTensorInfo* t : adapted) std::fwrite(t->data, 1, t->size_bytes, out);
  std::fclose(out);
  std::FILE* p = popen(("sha256sum '" + scratch + "'").c_str(), "r");
  EXPECT_NE(p, nullptr);
  if (p == nullptr) return {};
  char hash[65] = {0};
  const int n = std::fscanf(p, "%64s", hash);
  pclose(p);
  return n == 1 ? hash : "";
}

TEST_F(LoraMerge, MatchesLlamaExportLora) {
  ThreadPool pool(2);
  for (const std::string scale : {"1.0", "0.5"}) {
    const std::string ours_path = dir_.file("merged-" + scale + ".gguf");
    const LoraMergeReport r =
        merge_lora(shared_path(kBaseModel),
                   LoraSpec{"a", lora_path("adapters/lora-a.gguf"), std::stof(scale)}, ours_path);
    EXPECT_EQ(r.merged, 7);
    EXPECT_EQ(r.converted_f16, 0);
    const GgufFile ours = GgufFile::open(ours_path);
    // W + s B A in F32: the very bytes llama-export-lora wrote for every adapted matrix.
    EXPECT_EQ(adapted_tensors_sha256(ours, dir_.file("adapted-" + scale)),
              recorded_sha256("lora-a@" + scale))
        << scale;
    const GgufFile base = GgufFile::open(shared_path(kBaseModel));
    EXPECT_GT(max_tensor_diff(ours, base, true), 1e-2f) << "nothing was merged";
    EXPECT_EQ(max_tensor_diff(ours, base, false), 0.0f);
    // Metadata: the base's, key for key.
    ASSERT_EQ(ours.metadata().size(), base.metadata().size());
    for (size_t i = 0; i < base.metadata().size(); ++i) {
      EXPECT_EQ(ours.metadata()[i].key, base.metadata()[i].key);
    }
    // Logits of the merged model against llama.cpp's for its merged model.
    LoadedForTest merged = load_for_test(ours_path);
    const int vocab = merged.model->config().vocab_size;
    for (const ReferenceSequence& seq : read_reference_sequences(shared_path(kTokens))) {
      if (seq.name == "long200") continue;
      const std::vector<float> ref = read_reference_logits(
          lora_path("logits/merged-lora-a@" + scale + "." + seq.name + ".logits"),
          seq.tokens.size(), vocab);
      const std::vector<float> got = all_logits(*merged.model, seq.tokens, pool);
      float worst = 0;
      for (size_t i = 0; i < seq.tokens.size(); ++i) {
        worst = std::max(
            worst, compare_row(got.data() + i * vocab, ref.data() + i * vocab, vocab).max_abs);
      }
      EXPECT_LE(worst, 5e-3f) << scale << " " << seq.name;  // lora_logits_test's bound
    }
  }
}

TEST_F(LoraMerge, PeftAndGgufMergeToTheSameBytesAndMistakesAreRefused) {
  const std::string from_gguf = dir_.file("gguf.gguf"), from_peft = dir_.file("peft.gguf");
  merge_lora(shared_path(kBaseModel), LoraSpec{"a", lora_path("adapters/lora-b.gguf"), 0.7f},
             from_gguf);
  merge_lora(shared_path(kBaseModel), LoraSpec{"a", lora_path("adapters/peft-lora-b"), 0.7f},
             from_peft);
  const GgufFile a = GgufFile::open(from_gguf), b = GgufFile::open(from_peft);
  EXPECT_EQ(max_tensor_diff(a, b, true), 0.0f);
  expect_error(
      [&] {
        merge_lora(shared_path(kBaseModel), LoraSpec{"a", lora_path("adapters/lora-a.gguf"), 1},
                   shared_path(kBaseModel));
      },
      ErrorCode::kInvalidArgument, "the output is the base model itself");
  expect_error(
      [&] {
        merge_lora(shared_path(kBaseModel), LoraSpec{"a", shared_path(kBaseModel), 1},
                   dir_.file("x.gguf"));
      },
      ErrorCode::kInvalidArgument, "is not a LoRA adapter");
}

TEST_F(LoraMerge, CommandWritesTheMergedModel) {
  const std::string out = dir_.file("cli.gguf");
  const CliResult r = run_rapide("lora merge " + shared_path(kBaseModel) + " " +
                                 lora_path("adapters/peft-lora-a") + " -o " + out + " --scale 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("7 matrices merged (scale 0.5)"), std::string::npos) << r.out;
  const std::string lib = dir_.file("lib.gguf");
  merge_lora(shared_path(kBaseModel), LoraSpec{"a", lora_path("adapters/lora-a.gguf"), 0.5f}, lib);
  EXPECT_EQ(max_tensor_diff(GgufFile::open(out), GgufFile::open(lib), true), 0.0f);
  const CliResult bad = run_rapide("lora merge " + shared_path(kBaseModel) + " -o " + out);
  EXPECT_NE(bad.exit_code, 0) << bad.out;
}

}  // namespace
}  // namespace rapide::testing
