#include "template/chat_template.h"

#include "base/error.h"
#include "template/jinja_evaluator.h"
#include "template/jinja_parser.h"
#include "template/jinja_value.h"

namespace rapide {

struct ChatTemplate::Impl {
  jinja::ParsedTemplate parsed;
};

ChatTemplate::ChatTemplate(const std::string& source)
    : impl_(std::make_unique<Impl>(Impl{jinja::parse_template(source)})) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  // The same variables, in the same order, as transformers' apply_chat_template.
  jinja::ValueDict variables;
  variables.set("messages", jinja::Value::from_json(inputs.messages));
  variables.set("tools", jinja::Value::from_json(inputs.tools));
  variables.set("documents", jinja::Value::none());
  variables.set("add_generation_prompt", jinja::Value(inputs.add_generation_prompt));
  variables.set("bos_token", jinja::Value(inputs.bos_token));
  variables.set("eos_token", jinja::Value(inputs.eos_token));
  if (inputs.extra_context.is_object()) {
    for (const auto& [k, v] : inputs.extra_context.items())
      variables.set(k, jinja::Value::from_json(v));
  }
  try {
    return jinja::render_template(impl_->parsed, variables);
  } catch (const jinja::RenderError& e) {
    if (e.raised_by_template()) throw Error(ErrorCode::kInvalidArgument, e.what());
    fail(ErrorCode::kInvalidArgument, "chat template line {}: {}", e.line, e.what());
  }
}

std::string ChatTemplate::render_fallback(const ChatTemplateInputs& inputs) {
  std::string out;
  for (const auto& message : inputs.messages) {
    std::string role = message.contains("role") && message["role"].is_string()
                           ? message["role"].get<std::string>()
                           : "";
    std::string content;
    if (message.contains("content")) {
      const auto& c = message["content"];
      if (c.is_string()) {
        content = c.get<std::string>();
      } else if (c.is_array()) {
        for (const auto& part : c) {
          if (part.is_object() && part.contains("text") && part["text"].is_string()) {
            content += part["text"].get<std::string>();
          }
        }
      } else if (!c.is_null()) {
        content = c.dump();
      }
    }
    out += role + ": " + content + "\n";
  }
  if (inputs.add_generation_prompt) out += "assistant:";
  return out;
}

}  // namespace rapide
