// Chat templates rapide ships, by name, for models whose file has none (or a wrong one):
// `--chat-template chatml` in `rapide serve` and `rapide chat`. Each is the common form of
// that family's template as the model cards publish it, in the Jinja dialect ChatTemplate
// renders (bos_token / eos_token / add_generation_prompt as transformers passes them).
#pragma once

#include <string>
#include <vector>

namespace rapide {

// chatml, gemma, llama2, llama3, mistral, phi3.
std::vector<std::string> chat_template_names();

// The source of a named template; throws Error(kNotFound) listing the names otherwise.
const std::string& named_chat_template(const std::string& name);

// `--chat-template VALUE`: a shipped name, else the path of a file holding a Jinja template.
// Throws Error(kNotFound) naming both readings when VALUE is neither.
std::string resolve_chat_template(const std::string& value);

}  // namespace rapide
