// The built-in demo model: loads like a file, generates, and formats chat with ChatML.
#include <gtest/gtest.h>

#include "api/chat.h"
#include "engine/engine.h"
#include "serve/demo_model.h"

namespace rapide::serve {
namespace {

TEST(DemoModel, IsASelfContainedLlamaThatGenerates) {
  auto file = std::make_shared<const ModelFile>(make_demo_model());
  EXPECT_EQ(file->config.architecture, "llama");
  auto tokenizer = Tokenizer::create(file->tokenizer);
  // Any UTF-8 text round-trips through the byte-fallback vocabulary.
  const std::string text = "hello world, the story of a démo ✓";
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false)), text);
  // Common words are single tokens.
  EXPECT_EQ(tokenizer->encode("the", false).size(), 1u);

  Model model(file);
  EngineOptions options;
  options.threads = 1;
  options.kv_memory = "16MiB";
  Engine engine(model, *tokenizer, options);
  auto queue = std::make_shared<EventQueue>();
  Request request;
  request.prompt = tokenizer->encode("hello", true);
  request.sampling.max_tokens = 8;
  request.sampling.ignore_eos = true;
  request.sink = queue;
  engine.submit(std::move(request));
  TokenEvent event;
  while (queue->pop(event, std::chrono::seconds(30)) && !event.finished) {
  }
  EXPECT_TRUE(event.finished);
  EXPECT_EQ(event.completion_tokens, 8);
}

TEST(DemoModel, ChatUsesItsChatMlTemplateWithControlTokens) {
  const ModelFile file = make_demo_model();
  auto tokenizer = Tokenizer::create(file.tokenizer);
  const api::ChatPrompter chat(*tokenizer);
  ASSERT_TRUE(chat.has_template()) << chat.description();
  const nlohmann::json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(chat.render(messages, nullptr),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> tokens = chat.prompt_tokens(messages, nullptr);
  ASSERT_GE(tokens.size(), 3u);
  EXPECT_EQ(tokens[0], tokenizer->bos_id());  // the template writes no BOS: one is added
  EXPECT_EQ(tokens[1], 3);                    // <|im_start|> parsed as its control token
}

}  // namespace
}  // namespace rapide::serve
