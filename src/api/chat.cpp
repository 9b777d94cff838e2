#include "api/chat.h"

#include "api/api_error.h"
#include "api/structured_output.h"
#include "base/error.h"
#include "base/logging.h"
#include "template/chat_template.h"

namespace rapide::api {

using nlohmann::json;

ChatPrompter::ChatPrompter(const Tokenizer& tokenizer, const std::string& override_source,
                           const std::string& tool_call_parser)
    : tokenizer_(tokenizer) {
  tool_format_ = tool_call_format_of_template(
      override_source.empty() ? tokenizer.data().chat_template : override_source);
  if (!tool_call_parser.empty()) {
    const auto format = tool_call_format_from_name(tool_call_parser);
    if (!format) {
      fail(ErrorCode::kInvalidArgument,
           "--tool-call-parser '{}' is not one of hermes, llama3, mistral, json", tool_call_parser);
    }
    tool_format_ = *format;
  }
  if (tokenizer.bos_id() >= 0) bos_text_ = tokenizer.token_to_piece(tokenizer.bos_id(), true);
  if (tokenizer.eos_id() >= 0) eos_text_ = tokenizer.token_to_piece(tokenizer.eos_id(), true);
  if (!override_source.empty()) {  // the user chose it: a syntax error is theirs to fix
    template_ = std::make_unique<ChatTemplate>(override_source);
    description_ = "the chat template given with --chat-template";
    return;
  }
  const std::string& source = tokenizer.data().chat_template;
  if (source.empty()) {
    description_ = "no chat template in the model: plain 'role: content' fallback";
    return;
  }
  try {
    template_ = std::make_unique<ChatTemplate>(source);
    description_ = "the model's chat template";
  } catch (const Error& e) {
    description_ = fmt::format("chat template does not parse ({}): plain fallback", e.what());
  }
}

ChatPrompter::~ChatPrompter() = default;

bool ChatPrompter::has_template() const {
  return template_ != nullptr;
}

std::string ChatPrompter::render(const json& messages, const json& tools) const {
  ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.tools = tools;
  inputs.add_generation_prompt = true;
  inputs.bos_token = bos_text_;
  inputs.eos_token = eos_text_;
  if (!template_) return ChatTemplate::render_fallback(inputs);
  try {
    return template_->render(inputs);
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("chat template: {}", e.what()), "messages", "invalid_value");
  }
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

void ChatPrompter::fill_prompt(GenerationSpec& spec) const {
  if (spec.endpoint != Endpoint::kChat) return;
  spec.prompts = {prompt_tokens(spec.messages, spec.tools)};
  spec.tool_format = tool_format_;
  if (!spec.tool_call_required) return;
  std::string gbnf;
  try {
    gbnf =
        tool_call_gbnf(tool_format_, spec.tools, spec.tool_choice_name, spec.parallel_tool_calls);
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("tools: {}", e.what()), "tools",
                   e.code() == ErrorCode::kUnsupported ? "unsupported" : "invalid_value");
  }
  spec.sampling.constraint = constraint_for_gbnf(gbnf, "tools");
}

}  // namespace rapide::api
