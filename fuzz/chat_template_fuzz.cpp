// libFuzzer target: a chat template's source (from the model file) parsed and rendered with
// messages and tools that are also fuzzed. Input: the template, then optionally a NUL byte
// and a JSON object {"messages": ..., "tools": ...} (what a request supplies; any JSON, at
// most kMaxJsonDepth deep as the server admits it). Parsing and rendering must succeed or
// throw rapide::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_nesting.h"
#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source(input.substr(0, nul));
  rapide::ChatTemplateInputs inputs;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.messages = {{{"role", "system"}, {"content", "Be brief."}},
                     {{"role", "user"}, {"content", "Hi <b>there</b>\n"}},
                     {{"role", "assistant"}, {"content", "Hello!"}},
                     {{"role", "user"}, {"content", "Bye"}}};
  if (nul != std::string_view::npos) {
    const std::string_view context = input.substr(nul + 1);
    if (rapide::json_nesting_exceeds(context)) return 0;
    const auto j = nlohmann::ordered_json::parse(context, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      if (j.contains("messages")) inputs.messages = j["messages"];
      if (j.contains("tools")) inputs.tools = j["tools"];
      inputs.add_generation_prompt = !j.contains("no_generation_prompt");
    }
  }
  try {
    const rapide::ChatTemplate chat_template(source);
    (void)chat_template.render(inputs);
  } catch (const rapide::Error&) {
  }
  try {
    (void)rapide::ChatTemplate::render_fallback(inputs);
  } catch (const rapide::Error&) {
  }
  return 0;
}
