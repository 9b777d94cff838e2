#include "serve/chat.h"

#include "base/error.h"
#include "base/logging.h"
#include "serve/api_error.h"
#ifdef RAPIDE_HAVE_CHAT_TEMPLATE
#include "tokenizer/chat_template.h"
#endif

namespace rapide::serve {

using nlohmann::json;

struct ChatPrompter::Impl {
#ifdef RAPIDE_HAVE_CHAT_TEMPLATE
  std::unique_ptr<ChatTemplate> chat_template;
#endif
};

std::string render_plain_chat(const json& messages) {
  std::string text;
  for (const json& m : messages) {
    text += m.value("role", "user");
    text += ": ";
    text += m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>()
                                                              : std::string();
    text += "\n";
  }
  text += "assistant:";
  return text;
}

ChatPrompter::ChatPrompter(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), impl_(std::make_unique<Impl>()) {
  if (tokenizer.bos_id() >= 0) bos_text_ = tokenizer.token_to_piece(tokenizer.bos_id(), true);
  if (tokenizer.eos_id() >= 0) eos_text_ = tokenizer.token_to_piece(tokenizer.eos_id(), true);
  const std::string& source = tokenizer.data().chat_template;
  if (source.empty()) {
    description_ = "no chat template in the model: plain 'role: content' fallback";
    return;
  }
#ifdef RAPIDE_HAVE_CHAT_TEMPLATE
  try {
    impl_->chat_template = std::make_unique<ChatTemplate>(source);
    description_ = "the model's chat template";
  } catch (const Error& e) {
    description_ = fmt::format("chat template does not parse ({}): plain fallback", e.what());
  }
#else
  description_ = "chat templates are not built into this binary: plain fallback";
#endif
}

ChatPrompter::~ChatPrompter() = default;

bool ChatPrompter::has_template() const {
#ifdef RAPIDE_HAVE_CHAT_TEMPLATE
  return impl_->chat_template != nullptr;
#else
  return false;
#endif
}

std::string ChatPrompter::render(const json& messages, const json& tools) const {
#ifdef RAPIDE_HAVE_CHAT_TEMPLATE
  if (impl_->chat_template) {
    ChatTemplateInputs inputs;
    inputs.messages = messages;
    inputs.tools = tools;
    inputs.add_generation_prompt = true;
    inputs.bos_token = bos_text_;
    inputs.eos_token = eos_text_;
    try {
      return impl_->chat_template->render(inputs);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("chat template: {}", e.what()), "messages", "invalid_value");
    }
  }
#else
  (void)tools;
#endif
  return render_plain_chat(messages);
}

std::vector<int32_t> ChatPrompter::prompt_tokens(const json& messages, const json& tools) const {
  const std::string text = render(messages, tools);
  try {
    if (!has_template()) return tokenizer_.encode(text, /*add_bos=*/true);
    // Templates that write BOS themselves must not get a second one.
    const bool template_wrote_bos = !bos_text_.empty() && text.starts_with(bos_text_);
    return tokenizer_.encode(text, !template_wrote_bos, /*parse_special=*/true);
  } catch (const Error& e) {
    throw api_error_from(e, "messages");
  }
}

}  // namespace rapide::serve
