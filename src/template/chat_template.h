// Turns chat messages into a prompt with the model's own `tokenizer.chat_template` (Jinja),
// rendered by a small interpreter covering what real templates use: for / if / set / macro /
// call / filter blocks, break / continue, filters, tests, loop variables, namespace(),
// raise_exception and strftime_now. Rendering matches Python's jinja2 as transformers
// configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, tojson with
// ensure_ascii=False); tests/unit/template checks it byte for byte against jinja2.
// Known gaps (no real template relies on them): upper / lower / title map ASCII letters only;
// dict.items() / keys() / values() are plain lists (Python prints views differently); a
// filter's generator can be iterated more than once; str.format takes no format specs;
// recursive for loops, {% include %} / {% extends %} / {% block %}, transformers'
// {% generation %} tag and tojson's separators are not supported.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace rapide {

// The variables a template sees, as transformers' apply_chat_template passes them: messages,
// tools (None when the request has none), documents (None unless extra_context sets it),
// add_generation_prompt, bos_token, eos_token, then every key of extra_context (e.g.
// date_string, enable_thinking). JSON objects keep their key order (ordered_json) because
// templates print tool schemas with tojson and the model saw the caller's order; a plain
// nlohmann::json converts implicitly, with its keys sorted.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array();  // [{"role": ..., "content": ...}]
  nlohmann::ordered_json tools;         // null when the request has none
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra_context =
      nlohmann::ordered_json::object();  // more variables, if any
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
  // verbatim (e.g. "Conversation roles must alternate user/assistant/...") or, for any other
  // failure, "chat template line N: <jinja2's message>" ("'dict object' has no attribute 'x'").
  std::string render(const ChatTemplateInputs& inputs) const;

  // A plain fallback for models without a template: one "role: content\n" line per message,
  // then "assistant:" when add_generation_prompt. A content given as OpenAI content parts
  // contributes the concatenation of its text parts; a null content prints as empty.
  static std::string render_fallback(const ChatTemplateInputs& inputs);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapide
