// The rule that a Hugging Face config.json holds nothing rapide silently leaves out, as
// known_keys.h for GGUF: every top-level key is in the table for the folder's
// `architectures` class, either read by config_from_hf_json (which refuses the values rapide
// does not compute) or known not to change the logits (with the reason); any other key is
// refused with one line naming it (kUnsupported). Math-changing keys rapide does not
// implement (quantization_config, rope_local_base_freq, logit scales...) are refused, never
// ignored.
//
// The table is kHfConfigKeys in hf_config_keys.cpp, keyed by transformers class names
// (LlamaForCausalLM, ...), since classes sharing a GGUF architecture read different keys
// (Mistral's sliding_window windows every layer; Llama's config never reads it).
// docs/architectures.md lists it.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <span>
#include <string>
#include <string_view>

#include "formats/known_keys.h"

namespace rapide {

struct HfConfigKey {
  std::string_view key;
  std::string_view classes;  // "*": every class rapide loads; else space-separated names
  KeyUse use;
  std::string_view why;
};

std::span<const HfConfigKey> known_hf_config_keys();

// The table's entry for `key` of class `hf_class`; nullptr when rapide does not know it.
const HfConfigKey* find_hf_config_key(std::string_view hf_class, std::string_view key);

// Applies the rule to every top-level key of `config` (a config.json object of class
// `hf_class`, one rapide loads). `name` labels messages. Throws kUnsupported naming the
// first unknown key.
void check_hf_config_keys(const nlohmann::json& config, std::string_view hf_class,
                          const std::string& name);

}  // namespace rapide
