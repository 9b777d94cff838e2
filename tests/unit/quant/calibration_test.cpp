// The calibrated quantizer on a real model (stories260K): folding channel scales (AWQ,
// SmoothQuant) into the norms and matrices leaves the float model's logits unchanged before
// any rounding, and the statistics it collects are those of the calibration text.
#include "quant/calibrated_quantizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/mapped_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace rapide::quant {
namespace {

const char* kModel = "models/stories260K/stories260K.gguf";
const char* kText = "reference/greedy/stories260K__Once_upon_a_time.txt";

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kModel);
    RAPIDE_REQUIRE_SHARED(kText);
    file_ = std::make_shared<const ModelFile>(load_model(rapide::testing::shared_path(kModel)));
    tokens_ = Tokenizer::create(file_->tokenizer)
                  ->encode(read_text_file(rapide::testing::shared_path(kText)), true);
  }

  CalibrationResult run(CalibrationMethod method, float smooth, bool keep_float) {
    CalibrationOptions o;
    o.method = method;
    o.smooth_alpha = smooth;
    o.tokens = tokens_;
    o.keep_float = keep_float;
    QuantModelFacts facts;
    return calibrate(file_, *parse_quant_plan("q4_0"), facts, o, pool_);
  }

  // The model's logits for the first 32 calibration tokens, with `replaced` swapped in.
  std::vector<float> logits(const CalibrationResult* replaced) {
    auto file = std::make_shared<ModelFile>(*file_);
    if (replaced != nullptr) {
      for (TensorView& v : file->tensors) {
        auto it = replaced->tensors.find(v.name);
        if (it == replaced->tensors.end()) continue;
        v.type = it->second.type;
        v.data = it->second.data.data();
        v.size_bytes = it->second.data.size();
      }
    }
    Model model(file);
    // f32 cache: an f16 one rounds v / s and v differently (v -> o folding moves v).
    ContiguousKvStore kv(model.config(), 1, 64, KvType::kF32);
    Batch batch;
    for (int p = 0; p < 32; ++p) batch.add(tokens_[p], 0, p, true);
    const std::span<const float> out = model.forward(batch, kv, pool_);
    return {out.begin(), out.end()};
  }

  void expect_same_logits(const CalibrationResult& r) {
    const std::vector<float> want = logits(nullptr), got = logits(&r);
    ASSERT_EQ(want.size(), got.size());
    float scale = 0.0f, diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      diff = std::max(diff, std::fabs(want[i] - got[i]));
    }
    EXPECT_LT(diff, 1e-4f * scale) << "max logit " << scale;
  }

  // Whether folding moved the norms at all (else the logit comparison proves nothing).
  bool norm_changed(const CalibrationResult& r, const std::string& name) {
    auto it = r.tensors.find(name);
    if (it == r.tensors.end()) return false;
    const TensorView& v = file_->get(name);
    return std::memcmp(v.data, it->second.data.data(), v.size_bytes) != 0;
  }

  std::shared_ptr<const ModelFile> file_;
  std::vector<int32_t> tokens_;
  ThreadPool pool_{1};
};

TEST_F(Calibration, AwqFoldingKeepsFloatLogits) {
  const CalibrationResult r = run(CalibrationMethod::kAwq, -1.0f, /*keep_float=*/true);
  EXPECT_TRUE(norm_changed(r, "blk.0.attn_norm.weight"));
  EXPECT_TRUE(norm_changed(r, "blk.1.ffn_norm.weight"));
  EXPECT_TRUE(norm_changed(r, "output_norm.weight"));
  expect_same_logits(r);
}

// GPTQ folds AWQ's scales before quantizing (awq_before_gptq): the same invariant.
TEST_F(Calibration, GptqFoldingKeepsFloatLogits) {
  const CalibrationResult r = run(CalibrationMethod::kGptq, -1.0f, /*keep_float=*/true);
  EXPECT_TRUE(norm_changed(r, "blk.0.attn_norm.weight"));
  EXPECT_TRUE(norm_changed(r, "blk.1.ffn_norm.weight"));
  expect_same_logits(r);
}

TEST_F(Calibration, SmoothQuantFoldingKeepsFloatLogits) {
  const CalibrationResult r = run(CalibrationMethod::kRtn, 0.5f, /*keep_float=*/true);
  EXPECT_TRUE(norm_changed(r, "blk.0.attn_norm.weight"));
  expect_same_logits(r);
}

TEST_F(Calibration, ImportanceMatrixHoldsTheCalibrationStatistics) {
  const CalibrationResult r = run(CalibrationMethod::kRtn, -1.0f, false);
  const ModelConfig& c = file_->config;
  EXPECT_EQ(r.imatrix.entries.size(), static_cast<size_t>(7 * c.n_layers + 1));
  const ImatrixEntry* q = r.imatrix.find("blk.0.attn_q.weight");
  const ImatrixEntry* k = r.imatrix.find("blk.0.attn_k.weight");
  const ImatrixEntry* down = r.imatrix.find("blk.0.ffn_down.weight");
  ASSERT_TRUE(q && k && down);
  EXPECT_EQ(q->values, k->values);  // one input, one entry's values
  EXPECT_EQ(q->values.size(), static_cast<size_t>(c.dim));
  EXPECT_EQ(down->values.size(), static_cast<size_t>(c.ffn_dim));
  EXPECT_EQ(q->ncall, 1);  // one chunk: the text is shorter than the context
  // The attention input is RMS-normalised: its mean x^2 over channels is the mean square of
  // the norm weight times 1 (to the eps), which bounds the entries' average well away from 0.
  double mean = 0.0;
  for (float v : q->values) mean += v;
  EXPECT_GT(mean / c.dim, 1e-3);
}

TEST_F(Calibration, GptqNeedsCalibrationTokens) {
  CalibrationOptions o;
  o.method = CalibrationMethod::kGptq;
  QuantModelFacts facts;
  EXPECT_THROW(calibrate(file_, *parse_quant_plan("q4_0"), facts, o, pool_), Error);
}

}  // namespace
}  // namespace rapide::quant
