// What the request fuzzers share: the built-in demo model of `rapide serve` (generated in
// memory, no files), its tokenizer, chat prompter and an engine, made once per process, so
// a fuzzed body meets the same tokenizer, ChatML template and admission checks as a real one.
#pragma once

#include <memory>

#include "api/chat.h"
#include "engine/engine.h"
#include "formats/model_file.h"
#include "model/model.h"
#include "serve/demo_model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::fuzz {

struct DemoServer {
  std::shared_ptr<const ModelFile> file = std::make_shared<ModelFile>(serve::make_demo_model());
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::create(file->tokenizer);
  api::ChatPrompter chat{*tokenizer};
  Model model{file};
  std::unique_ptr<Engine> engine;

  DemoServer() {
    EngineOptions options;
    options.threads = 1;
    options.kv_memory = "16MiB";
    engine = std::make_unique<Engine>(model, *tokenizer, options);
  }
};

// The process-wide instance (never destroyed: libFuzzer exits without unwinding).
inline DemoServer& demo_server() {
  static DemoServer* server = new DemoServer();
  return *server;
}

}  // namespace rapide::fuzz
