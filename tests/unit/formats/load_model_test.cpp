// load_model's format detection and its errors for paths that are no model at all.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "formats/model_file.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using testing::expect_error;

TEST(LoadModel, DetectsEachFormat) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  EXPECT_EQ(load_model(testing::shared_path("models/stories260K/stories260K.gguf")).format, "gguf");
  EXPECT_EQ(load_model(testing::shared_path("models/stories260K/stories260K-v1.bin")).format,
            "llama2c");
  EXPECT_EQ(load_model(testing::shared_path("models/tinystories-656k/hf")).format, "hf");
  EXPECT_EQ(load_model(testing::shared_path("models/tinystories-656k/hf/model.safetensors")).format,
            "hf");
}

TEST(LoadModel, RejectsWhatIsNoModel) {
  testing::TempDir dir;
  expect_error([&] { load_model(dir.file("absent.gguf")); }, ErrorCode::kNotFound,
               "does not exist");
  expect_error([&] { load_model(dir.path().string()); }, ErrorCode::kNotFound,
               "directory without config.json");
  testing::write_file(dir.file("text.txt"),
                      std::string("Once upon a time there was a model file."));
  expect_error([&] { load_model(dir.file("text.txt")); }, ErrorCode::kCorrupt,
               "not a model file: not GGUF");
  testing::write_file(dir.file("empty"), std::string());
  expect_error([&] { load_model(dir.file("empty")); }, ErrorCode::kCorrupt, "too small");
  testing::write_file(dir.file("old.bin"), std::string("tjgg\x03\0\0\0", 8));
  expect_error([&] { load_model(dir.file("old.bin")); }, ErrorCode::kUnsupported, "pre-GGUF");
}

// open() of a FIFO blocks until a writer comes: given as a model file or an HF config.json,
// one used to hang the loader forever. Now it is refused at once, as a directory is.
TEST(LoadModel, RefusesAFifoWithoutBlocking) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("model.gguf").c_str(), 0600), 0);
  expect_error([&] { load_model(dir.file("model.gguf")); }, ErrorCode::kInvalidArgument,
               "not a regular file");
  std::filesystem::create_directory(dir.file("hf"));
  ASSERT_EQ(::mkfifo(dir.file("hf/config.json").c_str(), 0600), 0);
  expect_error([&] { load_model(dir.file("hf")); }, ErrorCode::kInvalidArgument,
               "not a regular file");
}

}  // namespace
}  // namespace rapide
