// GgufFile on real files and on files written by GgufWriter: metadata, typed accessors,
// tensor views.
#include "formats/gguf_reader.h"

#include <gtest/gtest.h>

#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using testing::expect_error;
using testing::shared_path;

TEST(GgufReader, ReadsStories260KMetadataAndTensors) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const GgufFile f = GgufFile::open(shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(f.get_i32("llama.block_count"), 5);
  EXPECT_EQ(f.get_u64("llama.attention.head_count"), 8u);
  EXPECT_FLOAT_EQ(f.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.scores").element_type, GgufType::kF32);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type")[0], 2);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd->size_bytes, 64u * 512 * 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(embd->data) % 32, 0u);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GgufReader, TypedAccessorsRejectMismatches) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const GgufFile f = GgufFile::open(shared_path("models/stories260K/stories260K.gguf"));
  expect_error([&] { f.get_u32("general.architecture"); }, ErrorCode::kCorrupt,
               "'general.architecture' has type string, expected an integer");
  expect_error([&] { f.get_string("llama.block_count"); }, ErrorCode::kCorrupt,
               "has type u32, expected string");
  expect_error([&] { f.get_f32("llama.block_count"); }, ErrorCode::kCorrupt, "expected a float");
  expect_error([&] { f.get_bool("llama.block_count"); }, ErrorCode::kCorrupt, "expected bool");
  expect_error([&] { f.get_array("llama.block_count"); }, ErrorCode::kCorrupt, "expected array");
  expect_error([&] { f.get_string_array("tokenizer.ggml.scores"); }, ErrorCode::kCorrupt,
               "array of f32, expected strings");
  expect_error([&] { f.get_i32_array("tokenizer.ggml.tokens"); }, ErrorCode::kCorrupt,
               "tokenizer.ggml.tokens[0]' has type string");
  expect_error([&] { f.get_u32("no.such.key"); }, ErrorCode::kNotFound, "no.such.key");
  // 0xFFFFFFFF is a valid u32 but not an i32.
  expect_error([&] { f.get_i32("tokenizer.ggml.padding_token_id"); }, ErrorCode::kCorrupt,
               "out of range");
  EXPECT_EQ(f.get_u32_or("no.such.key", 7), 7u);
  EXPECT_EQ(f.get_string_or("general.name", "x"), "llama");
}

TEST(GgufReader, ReadsVocabularyOnlyFilesWithoutPadding) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests");
  // These end right after their metadata (no tensors, no data section).
  const GgufFile gpt2 = GgufFile::open(shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf"));
  EXPECT_TRUE(gpt2.tensors().empty());
  EXPECT_EQ(gpt2.get_string_array("tokenizer.ggml.merges").size(), 50000u);
  const GgufFile spm = GgufFile::open(shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf"));
  EXPECT_TRUE(spm.get_bool("tokenizer.ggml.add_bos_token"));
}

TEST(GgufReader, IntegerGettersAcceptAnyWidthThatFits) {
  GgufWriter w;
  w.set("a.u8", GgufValue::u8(200));
  w.set("a.i64", GgufValue::i64(-5));
  w.set("a.u64big", GgufValue::u64(uint64_t{1} << 40));
  w.set("a.f64", GgufValue::f64(0.25));
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "mem");
  EXPECT_EQ(f.get_u32("a.u8"), 200u);
  EXPECT_EQ(f.get_i32("a.i64"), -5);
  EXPECT_EQ(f.get_u64("a.u64big"), uint64_t{1} << 40);
  EXPECT_FLOAT_EQ(f.get_f32("a.f64"), 0.25f);
  expect_error([&] { f.get_u32("a.i64"); }, ErrorCode::kCorrupt, "value -5 is out of range");
  expect_error([&] { f.get_u32("a.u64big"); }, ErrorCode::kCorrupt, "out of range");
}

}  // namespace
}  // namespace rapide
