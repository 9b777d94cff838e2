// load_model(): picks the loader from what the path is.
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/gguf_model.h"
#include "formats/hf_loader.h"
#include "formats/llama2c_loader.h"
#include "formats/model_file.h"

namespace rapide {

ModelFile load_model(const std::string& path, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(ErrorCode::kNotFound, "model '{}' does not exist", path);
  if (fs::is_directory(status)) {
    if (!fs::exists(fs::path(path) / "config.json")) {
      fail(ErrorCode::kNotFound,
           "'{}' is a directory without config.json (expected a Hugging Face model folder)", path);
    }
    return load_hf(path);
  }
  // A Hugging Face folder may also be named by one of its files.
  const fs::path p(path);
  if ((p.extension() == ".safetensors" || p.filename() == "config.json" ||
       p.filename() == "model.safetensors.index.json") &&
      fs::exists(p.parent_path() / "config.json")) {
    return load_hf(p.parent_path().string());
  }

  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() >= 4) {
    uint32_t magic;
    std::memcpy(&magic, file->data(), 4);
    if (magic == kGgufMagic) {
      return model_from_gguf(GgufFile::parse(file->data(), file->size(), path, file));
    }
    // Pre-GGUF llama.cpp containers: "ggml", "ggmf", "ggjt", "ggla" (stored little-endian).
    for (const char* old : {"lmgg", "fmgg", "tjgg", "algg"}) {
      if (std::memcmp(file->data(), old, 4) == 0) {
        fail(ErrorCode::kUnsupported,
             "'{}' is a pre-GGUF ggml file; convert it to GGUF with llama.cpp first", path);
      }
    }
  }
  return load_llama2c(path, options);
}

}  // namespace rapide
