// GgufWriter round trips: every metadata type (nested arrays included) and every tensor type
// read back bit-exactly by GgufFile; layout details llama.cpp relies on.
#include "formats/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/mapped_file.h"
#include "formats/gguf_reader.h"
#include "formats_test_util.h"

namespace rapide {
namespace {

using testing::expect_error;

GgufFile reparse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "roundtrip");
}

TEST(GgufWriter, RoundTripsEveryMetadataType) {
  GgufWriter w;
  w.set("t.u8", GgufValue::u8(250));
  w.set("t.i8", GgufValue::i8(-120));
  w.set("t.u16", GgufValue::u16(65000));
  w.set("t.i16", GgufValue::i16(-32000));
  w.set("t.u32", GgufValue::u32(4000000000u));
  w.set("t.i32", GgufValue::i32(-2000000000));
  w.set("t.u64", GgufValue::u64(18000000000000000000ull));
  w.set("t.i64", GgufValue::i64(-9000000000000000000ll));
  w.set("t.f32", GgufValue::f32(3.25f));
  w.set("t.f64", GgufValue::f64(-1e300));
  w.set("t.bool", GgufValue::boolean(true));
  w.set("t.string", GgufValue::string(std::string("h\xc3\xa9llo\0x", 8)));
  w.set("t.empty_string", GgufValue::string(""));
  w.set("t.strings", GgufValue::string_array({"a", "",
                                              "\xe2\x96\x81"
                                              "b"}));
  w.set("t.floats", GgufValue::f32_array({1.5f, -0.0f, INFINITY}));
  w.set("t.ints", GgufValue::i32_array({-1, 0, 7}));
  w.set("t.u8s", GgufValue::array(GgufType::kU8, {GgufValue::u8(1), GgufValue::u8(2)}));
  w.set("t.bools", GgufValue::array(GgufType::kBool, {GgufValue::boolean(false)}));
  w.set("t.f64s", GgufValue::array(GgufType::kF64, {GgufValue::f64(0.1)}));
  w.set("t.empty_array", GgufValue::array(GgufType::kI64, {}));
  w.set("t.nested",
        GgufValue::array(GgufType::kArray,
                         {GgufValue::i32_array({1, 2}), GgufValue::string_array({"x"}),
                          GgufValue::array(GgufType::kArray, {GgufValue::f32_array({9})})}));
  w.set("t.u8", GgufValue::u8(251));  // replaces in place
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile f = reparse(bytes);
  ASSERT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.metadata()[0].key, "t.u8");
  for (const auto& [key, value] : f.metadata()) {
    const GgufValue* written = w.find(key);
    ASSERT_NE(written, nullptr) << key;
    EXPECT_EQ(value.type, written->type) << key;
    EXPECT_EQ(value.to_string(100), written->to_string(100)) << key;
  }
  EXPECT_EQ(f.get_u32("t.u8"), 251u);
  EXPECT_EQ(f.get_i64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(f.get_f64("t.f64"), -1e300);
  EXPECT_EQ(f.get_string("t.string"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_TRUE(std::isinf(f.get_f32_array("t.floats")[2]));
  const GgufArray& nested = f.get_array("t.nested");
  ASSERT_EQ(nested.element_type, GgufType::kArray);
  ASSERT_EQ(nested.items.size(), 3u);
  EXPECT_EQ(nested.items[0].as_array().element_type, GgufType::kI32);
  EXPECT_EQ(nested.items[2].as_array().items[0].as_array().items[0].to_string(), "9");
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(GgufWriter, RoundTripsEveryTensorTypeBitExactly) {
  GgufWriter w;
  struct Case {
    const char* name;
    TensorType type;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {"f32", TensorType::kF32, {3}},
      {"f16", TensorType::kF16, {5, 3}},
      {"bf16", TensorType::kBF16, {7, 2, 2}},
      {"q8_0", TensorType::kQ8_0, {64, 3}},
      {"q4_0", TensorType::kQ4_0, {32, 2, 1, 3}},
  };
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t i = 0; i < cases.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : cases[i].shape) n *= d;
    const int64_t bytes =
        tensor_row_bytes(cases[i].type, cases[i].shape[0]) * (n / cases[i].shape[0]);
    payloads.push_back(random_bytes(static_cast<size_t>(bytes), static_cast<uint32_t>(i)));
    w.add_tensor(cases[i].name, cases[i].type, cases[i].shape, payloads.back().data(),
                 payloads.back().size());
  }
  // A tensor produced at write time.
  w.add_tensor("filled", TensorType::kF32, {2}, [](uint8_t* out) {
    const float v[2] = {1.0f, 2.0f};
    std::memcpy(out, v, 8);
  });
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile f = reparse(bytes);
  ASSERT_EQ(f.tensors().size(), cases.size() + 1);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.shape, cases[i].shape);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.size_bytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.size_bytes), 0) << t.name;
  }
  float filled[2];
  std::memcpy(filled, f.tensors().back().data, 8);
  EXPECT_EQ(filled[1], 2.0f);
}

TEST(GgufWriter, FileHeaderFollowsTheSpec) {
  GgufWriter w;
  w.set("k", GgufValue::u32(1));
  w.add_tensor("t", TensorType::kF32, {1}, "\0\0\x80\x3f", 4);
  const std::vector<uint8_t> b = w.to_bytes();
  // magic, version 3, 1 tensor, 1 kv, key "k" (u64 length), type u32 (4), value 1.
  const uint8_t expected[] = {'G', 'G', 'U', 'F', 3,   0, 0, 0, 1, 0, 0, 0, 0, 0,
                              0,   0,   1,   0,   0,   0, 0, 0, 0, 0, 1, 0, 0, 0,
                              0,   0,   0,   0,   'k', 4, 0, 0, 0, 1, 0, 0, 0};
  ASSERT_GE(b.size(), sizeof(expected));
  EXPECT_EQ(std::memcmp(b.data(), expected, sizeof(expected)), 0);
  EXPECT_EQ(b.size() % 32, 0u);  // data section and the tensor's padding are aligned
}

TEST(GgufWriter, WritesFilesAndHonoursCustomAlignment) {
  testing::TempDir dir;
  GgufWriter w = testing::tiny_llama_writer();
  w.set("general.alignment", GgufValue::u32(64));
  size_t last_done = 0;
  w.write(dir.file("a.gguf"), [&](size_t done, size_t total) {
    EXPECT_EQ(total, w.tensor_count());
    last_done = done;
  });
  EXPECT_EQ(last_done, w.tensor_count());
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.gguf.tmp")));
  const std::string text = read_text_file(dir.file("a.gguf"));
  const std::vector<uint8_t> mem = w.to_bytes();
  ASSERT_EQ(text.size(), mem.size());
  EXPECT_EQ(std::memcmp(text.data(), mem.data(), mem.size()), 0);
  const GgufFile f = GgufFile::open(dir.file("a.gguf"));
  EXPECT_EQ(f.alignment(), 64u);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
}

TEST(GgufWriter, RejectsInvalidTensorsAndKeys) {
  GgufWriter w;
  const float x[64] = {};
  expect_error([&] { w.add_tensor("a", TensorType::kF32, {}, x, 0); }, ErrorCode::kInvalidArgument,
               "0 dimensions");
  expect_error(
      [&] {
        w.add_tensor("a", TensorType::kF32, {1, 1, 1, 1, 1}, x, 4);
      },
      ErrorCode::kInvalidArgument, "5 dimensions");
  expect_error([&] { w.add_tensor("a", TensorType::kF32, {0}, x, 0); }, ErrorCode::kInvalidArgument,
               "invalid dimension 0");
  expect_error([&] { w.add_tensor("a", TensorType::kQ8_0, {16}, x, 17); },
               ErrorCode::kInvalidArgument, "not a multiple");
  expect_error([&] { w.add_tensor("a", TensorType::kF32, {4}, x, 12); },
               ErrorCode::kInvalidArgument, "given 12 bytes, its shape needs 16");
  w.add_tensor("a", TensorType::kF32, {4}, x, 16);
  expect_error([&] { w.add_tensor("a", TensorType::kF32, {4}, x, 16); },
               ErrorCode::kInvalidArgument, "duplicate GGUF tensor 'a'");
  expect_error([&] { w.set("general.alignment", GgufValue::u32(48)); }, ErrorCode::kInvalidArgument,
               "power of two");
  expect_error([&] { GgufValue::array(GgufType::kU8, {GgufValue::i8(1)}); },
               ErrorCode::kInvalidArgument, "array of u8 given an item of type i8");
}

}  // namespace
}  // namespace rapide
