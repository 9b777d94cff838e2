#include "apps/rapide/tokenizer_loading.h"

#include <cstring>
#include <fstream>

#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"
#include "formats/model_file.h"

namespace rapide::cli {
namespace {

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path,
                                          const std::string& tokenizer_path) {
  if (starts_with_gguf_magic(model_path)) {
    // Metadata only: no architecture or tensor checks, which vocabulary-only files would fail.
    return Tokenizer::create(tokenizer_from_gguf(GgufFile::open(model_path)));
  }
  LoadOptions options;
  options.tokenizer_path = tokenizer_path;
  return Tokenizer::create(load_model(model_path, options).tokenizer);
}

void add_tokenizer_source_options(CLI::App* cmd, std::string* model_path,
                                  std::string* tokenizer_path) {
  cmd->add_option("-m,--model", *model_path,
                  "a GGUF file (vocabulary-only files too), a llama2.c checkpoint or a Hugging "
                  "Face folder")
      ->required();
  cmd->add_option("--tokenizer", *tokenizer_path,
                  "tokenizer.bin for llama2.c checkpoints (default: next to the checkpoint)");
}

}  // namespace rapide::cli
