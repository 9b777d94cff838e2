// Turns chat messages into a prompt with the model's own `tokenizer.chat_template` (Jinja),
// rendered by a small interpreter covering what real templates use: for / if / set / macro,
// filters, loop variables, tests, raise_exception. Rendering matches Python's jinja2.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace rapide {

struct ChatTemplateInputs {
  nlohmann::json messages = nlohmann::json::array();  // [{"role": ..., "content": ...}, ...]
  nlohmann::json tools;                               // null when the request has none
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::json extra_context = nlohmann::json::object();  // more variables, if any
};

class ChatTemplate {
 public:
  // Parses the template once. Throws Error(kInvalidArgument) with line/column for a syntax
  // error in the template.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders; throws Error(kInvalidArgument) carrying the template's raise_exception message
  // (e.g. "Conversation roles must alternate user/assistant/...") or a render error.
  std::string render(const ChatTemplateInputs& inputs) const;

  // A plain fallback for models without a template: "role: content" lines, then
  // "assistant:" when add_generation_prompt.
  static std::string render_fallback(const ChatTemplateInputs& inputs);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapide
