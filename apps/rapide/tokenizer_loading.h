// Loading just a model's tokenizer, for commands that never run the model (tokenize,
// detokenize): a GGUF file is read for its metadata only, so vocabulary-only files such as
// llama.cpp's models/ggml-vocab-*.gguf work; other formats go through load_model.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace rapide::cli {

// Throws Error naming the file when it cannot be read or carries no vocabulary.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path,
                                          const std::string& tokenizer_path);

// The -m/--model (required) and --tokenizer options of such a command.
void add_tokenizer_source_options(CLI::App* cmd, std::string* model_path,
                                  std::string* tokenizer_path);

}  // namespace rapide::cli
