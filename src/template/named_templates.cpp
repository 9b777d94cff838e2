#include "template/named_templates.h"

#include <filesystem>
#include <map>

#include "base/error.h"
#include "base/mapped_file.h"

namespace rapide {

namespace {

// Every template loops over messages and ends with the assistant's opening when
// add_generation_prompt; system messages go where the family puts them.
const std::map<std::string, std::string>& templates() {
  static const std::map<std::string, std::string> table = {
      {"chatml",
       "{% for message in messages %}"
       "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
       "{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
      {"llama3",
       "{{ bos_token }}"
       "{% for message in messages %}"
       "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
       "message['content'] | trim + '<|eot_id|>' }}"
       "{% endfor %}"
       "{% if add_generation_prompt %}"
       "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
       "{% endif %}"},
      {"llama2",
       "{% if messages[0]['role'] == 'system' %}"
       "{% set system = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
       "{% set loop_messages = messages[1:] %}"
       "{% else %}{% set system = '' %}{% set loop_messages = messages %}{% endif %}"
       "{% for message in loop_messages %}"
       "{% if message['role'] == 'user' %}"
       "{% if loop.first %}{% set content = system + message['content'] %}"
       "{% else %}{% set content = message['content'] %}{% endif %}"
       "{{ bos_token + '[INST] ' + content | trim + ' [/INST]' }}"
       "{% elif message['role'] == 'assistant' %}"
       "{{ ' ' + message['content'] | trim + ' ' + eos_token }}"
       "{% endif %}"
       "{% endfor %}"},
      {"mistral",
       "{{ bos_token }}"
       "{% if messages[0]['role'] == 'system' %}"
       "{% set system = messages[0]['content'] + '\\n\\n' %}"
       "{% set loop_messages = messages[1:] %}"
       "{% else %}{% set system = '' %}{% set loop_messages = messages %}{% endif %}"
       "{% for message in loop_messages %}"
       "{% if message['role'] == 'user' %}"
       "{% if loop.first %}{{ '[INST] ' + system + message['content'] + '[/INST]' }}"
       "{% else %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% endif %}"
       "{% elif message['role'] == 'assistant' %}"
       "{{ message['content'] + eos_token }}"
       "{% endif %}"
       "{% endfor %}"},
      {"gemma",
       "{{ bos_token }}"
       "{% for message in messages %}"
       "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
       "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
       "{% endfor %}"
       "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
      {"phi3",
       "{% for message in messages %}"
       "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
       "{% endfor %}"
       "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
  };
  return table;
}

std::string joined_names() {
  std::string out;
  for (const std::string& name : chat_template_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const auto& [name, source] : templates()) names.push_back(name);
  return names;
}

const std::string& named_chat_template(const std::string& name) {
  const auto it = templates().find(name);
  if (it == templates().end()) {
    fail(ErrorCode::kNotFound, "no chat template named '{}' (rapide ships: {})", name,
         joined_names());
  }
  return it->second;
}

std::string resolve_chat_template(const std::string& value) {
  if (templates().count(value) != 0) return templates().at(value);
  std::error_code ec;
  if (!std::filesystem::exists(value, ec)) {
    fail(ErrorCode::kNotFound,
         "--chat-template '{}' is neither a template rapide ships ({}) nor a file", value,
         joined_names());
  }
  return read_text_file(value);
}

}  // namespace rapide
