// Broken GGUF files: each must be rejected with kCorrupt/kUnsupported and a message naming
// the problem, never a crash or an out-of-bounds read (run under ASan: -DRAPIDE_SANITIZE=ON).
//
// The corpus is made here by patching a valid file written by GgufWriter. With
// RAPIDE_WRITE_CORPUS=<dir> the cases are also written to that folder; tests/data/formats
// holds such a dump (fuzzer seeds), and the last test checks every file there is rejected.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "base/mapped_file.h"
#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using testing::expect_error;

// Parses from an exactly-sized heap copy so ASan flags any read past the end.
void load_from(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + (bytes.empty() ? 1 : 0)]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  model_from_gguf(GgufFile::parse(copy.get(), bytes.size(), "broken.gguf"));
}

size_t find(const std::vector<uint8_t>& b, const std::string& s, size_t from = 0) {
  for (size_t i = from; i + s.size() <= b.size(); ++i) {
    if (std::memcmp(b.data() + i, s.data(), s.size()) == 0) return i;
  }
  ADD_FAILURE() << "'" << s << "' not in file";
  return 0;
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T value) {
  std::memcpy(b.data() + at, &value, sizeof(T));
}

struct Case {
  std::string name;
  std::vector<uint8_t> bytes;
  ErrorCode code;
  std::string message;
};

// Offset of the field right after a key or tensor name stored as a GGUF string.
size_t after_name(const std::vector<uint8_t>& b, const std::string& name) {
  return find(b, name) + name.size();
}

std::vector<Case> corpus() {
  const std::vector<uint8_t> good = testing::tiny_llama_writer().to_bytes();
  std::vector<Case> cases;
  auto add = [&](std::string name, ErrorCode code, std::string message, auto patch) {
    std::vector<uint8_t> b = good;
    patch(b);
    cases.push_back({std::move(name), std::move(b), code, std::move(message)});
  };
  const ErrorCode corrupt = ErrorCode::kCorrupt, unsupported = ErrorCode::kUnsupported;
  add("bad_magic", corrupt, "not a GGUF file", [](auto& b) { b[0] = 'X'; });
  add("version_1", unsupported, "GGUF version 1", [](auto& b) { poke<uint32_t>(b, 4, 1); });
  add("version_4", unsupported, "GGUF version 4", [](auto& b) { poke<uint32_t>(b, 4, 4); });
  add("big_endian", unsupported, "big-endian", [](auto& b) { poke<uint32_t>(b, 4, 0x03000000); });
  add("huge_tensor_count", corrupt, "tensor count",
      [](auto& b) { poke<uint64_t>(b, 8, uint64_t{1} << 60); });
  add("huge_kv_count", corrupt, "metadata count",
      [](auto& b) { poke<uint64_t>(b, 16, ~uint64_t{0}); });
  add("huge_string_length", corrupt, "claims",
      [](auto& b) { poke<uint64_t>(b, 24, uint64_t{1} << 62); });
  add("huge_array_length", corrupt, "array items", [](auto& b) {
    poke<uint64_t>(b, after_name(b, "tokenizer.ggml.tokens") + 8, uint64_t{1} << 61);
  });
  add("unknown_value_type", corrupt, "unknown value type 99",
      [](auto& b) { poke<uint32_t>(b, after_name(b, "general.name"), 99); });
  add("unknown_array_type", corrupt, "array of unknown value type",
      [](auto& b) { poke<uint32_t>(b, after_name(b, "tokenizer.ggml.tokens") + 4, 13); });
  add("duplicate_key", corrupt, "duplicate metadata key 'tokenizer.ggml.tokens'", [](auto& b) {
    std::memcpy(b.data() + find(b, "tokenizer.ggml.scores"), "tokenizer.ggml.tokens", 21);
  });
  // Tensor info fields of blk.0.ffn_up.weight (2 dims, Q8_0): n_dims, dims, type, offset.
  const std::string up = "blk.0.ffn_up.weight";
  add("zero_dims", corrupt, "0 dimensions",
      [&](auto& b) { poke<uint32_t>(b, after_name(b, up), 0); });
  add("five_dims", corrupt, "5 dimensions",
      [&](auto& b) { poke<uint32_t>(b, after_name(b, up), 5); });
  add("zero_dim", corrupt, "dimension 1 is 0",
      [&](auto& b) { poke<uint64_t>(b, after_name(b, up) + 12, 0); });
  add("dims_overflow", corrupt, "overflows 64 bits", [&](auto& b) {
    poke<uint64_t>(b, after_name(b, up) + 4, uint64_t{1} << 40);
    poke<uint64_t>(b, after_name(b, up) + 12, uint64_t{1} << 40);
  });
  add("row_not_block_multiple", corrupt, "not a multiple of the q8_0 block size",
      [&](auto& b) { poke<uint64_t>(b, after_name(b, up) + 4, 33); });
  // A real ggml type rapide does not read (q4_K was the example until it was added).
  add("unsupported_type", unsupported, "ggml type iq2_xxs (16)",
      [&](auto& b) { poke<uint32_t>(b, after_name(b, up) + 20, 16); });
  add("unknown_type", unsupported, "ggml type unknown (1000)",
      [&](auto& b) { poke<uint32_t>(b, after_name(b, up) + 20, 1000); });
  add("misaligned_offset", corrupt, "not a multiple of the alignment", [&](auto& b) {
    uint64_t offset;
    std::memcpy(&offset, b.data() + after_name(b, up) + 24, 8);
    poke<uint64_t>(b, after_name(b, up) + 24, offset + 4);
  });
  add("offset_past_end", corrupt, "runs past the end",
      [&](auto& b) { poke<uint64_t>(b, after_name(b, up) + 24, uint64_t{1} << 20); });
  add("offset_overflow", corrupt, "runs past the end",
      [&](auto& b) { poke<uint64_t>(b, after_name(b, up) + 24, ~uint64_t{31}); });
  add("tensor_too_big", corrupt, "runs past the end",
      [&](auto& b) { poke<uint64_t>(b, after_name(b, up) + 12, 4096); });
  add("duplicate_tensor", corrupt, "duplicate tensor name", [&](auto& b) {
    std::memcpy(b.data() + find(b, "blk.0.ffn_gate.weight"), "blk.0.ffn_down", 14);
  });
  add("bad_token_type", corrupt, "unknown token type 42",
      [](auto& b) { poke<int32_t>(b, after_name(b, "tokenizer.ggml.token_type") + 16, 42); });
  add("wrong_tensor_shape", corrupt, "has shape [32, 31]",
      [](auto& b) { poke<uint64_t>(b, after_name(b, "blk.0.attn_q.weight") + 12, 31); });
  add("missing_tensor", corrupt, "missing tensor 'blk.0.attn_q.weight'",
      [](auto& b) { b[find(b, "blk.0.attn_q.weight") + 10] = 'X'; });
  add("truncated_header", corrupt, "too small", [](auto& b) { b.resize(3); });
  add("truncated_counts", corrupt, "metadata count 13 cannot fit", [](auto& b) { b.resize(100); });
  add("truncated_tensor_name", corrupt, "name of tensor 10",
      [&](auto& b) { b.resize(find(b, up) + 10); });
  add("truncated_tensor_info", corrupt, "truncated while reading blk.0.ffn_up.weight",
      [&](auto& b) { b.resize(after_name(b, up) + 2); });
  add("truncated_data", corrupt, "runs past the end", [](auto& b) { b.resize(b.size() - 700); });
  return cases;
}

TEST(GgufCorrupt, EveryBrokenFileIsRejectedWithAPreciseMessage) {
  const std::vector<Case> cases = corpus();
  const char* dump = std::getenv("RAPIDE_WRITE_CORPUS");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    expect_error([&] { load_from(c.bytes); }, c.code, c.message);
    if (dump) testing::write_file(std::string(dump) + "/" + c.name + ".gguf", c.bytes);
  }
}

TEST(GgufCorrupt, EveryTruncationIsRejected) {
  const std::vector<uint8_t> good = testing::tiny_llama_writer().to_bytes();
  const GgufFile f = GgufFile::parse(good.data(), good.size(), "good");
  uint64_t end = 0;  // the last byte any tensor uses; the padding after it is optional
  for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.size_bytes);
  for (size_t n = 0; n < end; ++n) {
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      load_from(b);
      ADD_FAILURE() << "truncation to " << n << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << n << ": " << e.what();
    }
  }
  std::vector<uint8_t> exact(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(end));
  EXPECT_NO_THROW(load_from(exact));
}

TEST(GgufCorrupt, DeeplyNestedArraysAreRejected) {
  GgufValue v = GgufValue::u8(1);
  v = GgufValue::array(GgufType::kU8, {v});
  for (int i = 0; i < 9; ++i) v = GgufValue::array(GgufType::kArray, {v});
  GgufWriter w;
  w.set("deep", v);
  expect_error([&] { load_from(w.to_bytes()); }, ErrorCode::kCorrupt, "nests arrays deeper");
}

// Each metadata array item becomes a GgufValue of ~50 bytes: a 100 MB file holding one u8
// array took 4.8 GB before its error. The items of all arrays together are bounded, and the
// count is checked before anything is reserved for it.
TEST(GgufCorrupt, MetadataArraysBeyondTheItemBudgetAreRejected) {
  const uint64_t count = GgufFile::kMaxMetadataItems + 1;
  std::vector<uint8_t> bytes;
  const auto put = [&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  const uint32_t magic = 0x46554747, version = 3, array = 9, u8 = 0;  // "GGUF"
  const uint64_t n_tensors = 0, n_kv = 1;
  const std::string key = "huge";
  const uint64_t key_len = key.size();
  put(&magic, 4);
  put(&version, 4);
  put(&n_tensors, 8);
  put(&n_kv, 8);
  put(&key_len, 8);
  put(key.data(), key.size());
  put(&array, 4);
  put(&u8, 4);
  put(&count, 8);
  bytes.resize(bytes.size() + count, 7);
  expect_error([&] { GgufFile::parse(bytes.data(), bytes.size(), "huge.gguf"); },
               ErrorCode::kCorrupt, "metadata arrays");
}

TEST(GgufCorrupt, InconsistentMetadataIsRejected) {
  auto with = [](const std::string& key, GgufValue value) {
    GgufWriter w = testing::tiny_llama_writer();
    w.set(key, std::move(value));
    return w.to_bytes();
  };
  {
    auto b = with("general.alignment", GgufValue::u32(64));
    poke<uint32_t>(b, after_name(b, "general.alignment") + 4, 48);
    expect_error([&] { load_from(b); }, ErrorCode::kCorrupt,
                 "general.alignment 48 is not a power of two");
  }
  {
    auto b = with("general.alignment", GgufValue::u32(64));
    poke<uint32_t>(b, after_name(b, "general.alignment"), 5);  // i32 instead of u32
    expect_error([&] { load_from(b); }, ErrorCode::kCorrupt, "general.alignment has type i32");
  }
  expect_error([&] { load_from(with("tokenizer.ggml.scores", GgufValue::f32_array({0}))); },
               ErrorCode::kCorrupt, "tokenizer.ggml.scores has 1 entries for 4 tokens");
  expect_error([&] { load_from(with("tokenizer.ggml.bos_token_id", GgufValue::u32(9))); },
               ErrorCode::kCorrupt, "tokenizer.ggml.bos_token_id = 9 is not a token id");
  expect_error([&] { load_from(with("llama.attention.head_count_kv", GgufValue::u32(3))); },
               ErrorCode::kCorrupt, "not a multiple of 3 KV heads");
  // A scaling rapide does not compute is refused by name (none, linear, yarn and longrope
  // run), and YaRN without its original context is incomplete.
  expect_error([&] { load_from(with("llama.rope.scaling.type", GgufValue::string("dynamic"))); },
               ErrorCode::kUnsupported, "rope scaling type 'dynamic'");
  expect_error([&] { load_from(with("llama.rope.scaling.type", GgufValue::string("yarn"))); },
               ErrorCode::kCorrupt, "original_context_length");
  expect_error([&] { load_from(with("llama.rope.dimension_count", GgufValue::u32(7))); },
               ErrorCode::kCorrupt, "rope.dimension_count 7 must be even");
  expect_error([&] { load_from(with("llama.block_count", GgufValue::string("1"))); },
               ErrorCode::kCorrupt, "'llama.block_count' has type string");
  expect_error([&] { load_from(with("tokenizer.ggml.model", GgufValue::string("bert"))); },
               ErrorCode::kUnsupported, "tokenizer.ggml.model 'bert'");
  expect_error([&] { load_from(with("llama.vocab_size", GgufValue::u32(5))); }, ErrorCode::kCorrupt,
               "tokenizer has 4 tokens but the model's vocabulary is 5");
  // An architecture rapide does not compute: one line naming it, never a llama-shaped run.
  expect_error([&] { load_from(with("general.architecture", GgufValue::string("mamba"))); },
               ErrorCode::kUnsupported, "architecture 'mamba' is not supported");
  {
    GgufWriter w = testing::tiny_llama_writer();
    const std::vector<float> factors(2, 1.0f);
    w.add_tensor("rope_factors_long.weight", TensorType::kF32, {2}, factors.data(), 8);
    expect_error([&] { load_from(w.to_bytes()); }, ErrorCode::kCorrupt,
                 "this file has only one side");
  }
  // Experts announced by the metadata must be there, and be routable.
  expect_error([&] { load_from(with("llama.expert_count", GgufValue::u32(4))); },
               ErrorCode::kCorrupt, "4 experts with 0 used per token");
  {
    GgufWriter w = testing::tiny_llama_writer();
    w.set("llama.expert_count", GgufValue::u32(2));
    w.set("llama.expert_used_count", GgufValue::u32(1));
    expect_error([&] { load_from(w.to_bytes()); }, ErrorCode::kCorrupt,
                 "missing tensor 'blk.0.ffn_gate_inp.weight'");
  }
}

TEST(GgufCorrupt, CommittedCorpusIsRejected) {
  const std::string dir = testing::test_data_path("formats");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    try {
      const std::string text = read_text_file(entry.path().string());
      load_from(std::vector<uint8_t>(text.begin(), text.end()));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kCorrupt || e.code() == ErrorCode::kUnsupported)
          << e.what();
    }
  }
  EXPECT_GE(files, 20);
}

// Mistral-style sliding windows in GGUF: a llama file that carries
// llama.attention.sliding_window attends through it on every layer; one without (what
// llama.cpp's converter writes for Mistral) attends to the whole context, as in llama.cpp.
TEST(GgufModel, LlamaSlidingWindowKeyWindowsEveryLayer) {
  auto window = [](std::optional<uint32_t> value) {
    GgufWriter w = testing::tiny_llama_writer();
    if (value) w.set("llama.attention.sliding_window", GgufValue::u32(*value));
    std::vector<uint8_t> copy = w.to_bytes();
    return model_from_gguf(GgufFile::parse(copy.data(), copy.size(), "w.gguf"))
        .config.every_layer_window();
  };
  EXPECT_EQ(window(16), 16);
  EXPECT_EQ(window(std::nullopt), 0);
}

}  // namespace
}  // namespace rapide
