// Chat messages -> prompt tokens, through the model's own chat template.
//
// The template (GGUF tokenizer.chat_template) is parsed once per server. It sees the
// tokenizer's BOS/EOS text as bos_token / eos_token; the rendered text is tokenized with
// special-token parsing (so "<|im_start|>" becomes its control token) and without adding
// BOS when the template already wrote it. Models without a template get a plain
// "role: content" fallback, tokenized as ordinary text with BOS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
class ChatTemplate;
}

namespace rapide::api {

class ChatPrompter {
 public:
  // A template that does not parse is not fatal: description() says so and the fallback
  // is used, so a model with an exotic template can still be served. A non-empty
  // `override_source` (--chat-template) replaces the model's template; it must parse.
  // `tool_call_parser` names the tool-call format (tool_calls.h); empty: the template's.
  // Throws Error(kInvalidArgument) for an unknown name.
  explicit ChatPrompter(const Tokenizer& tokenizer, const std::string& override_source = {},
                        const std::string& tool_call_parser = {});
  ~ChatPrompter();

  // Renders and tokenizes. Throws ApiError(400) for a template error (raise_exception).
  std::vector<int32_t> prompt_tokens(const nlohmann::json& messages,
                                     const nlohmann::json& tools) const;
  // A chat request gets its one prompt from its messages; completions keep theirs. It also
  // gets the model's tool-call format and, for a required or named tool_choice, the grammar
  // that forces a call (ApiError 400 "tools" for a parameter schema it cannot express).
  void fill_prompt(GenerationSpec& spec) const;
  ToolCallFormat tool_call_format() const { return tool_format_; }
  // The rendered text (for logs and tests).
  std::string render(const nlohmann::json& messages, const nlohmann::json& tools) const;

  bool has_template() const;
  // "the model's chat template" or why the fallback is used.
  const std::string& description() const { return description_; }

 private:
  const Tokenizer& tokenizer_;
  std::unique_ptr<ChatTemplate> template_;  // null: the plain fallback
  std::string bos_text_;
  std::string eos_text_;
  std::string description_;
  ToolCallFormat tool_format_ = ToolCallFormat::kJson;
};

}  // namespace rapide::api
