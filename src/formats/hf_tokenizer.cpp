#include "formats/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <unordered_map>

#include "base/error.h"
#include "formats/model_json.h"

namespace rapide {
namespace {

using nlohmann::json;

constexpr float kHfTokenScore = -1000.0f;  // llama.cpp LlamaHfVocab.get_token_score

json parse_json(const std::string& text, const std::string& name, const char* file) {
  return parse_model_json(text, fmt::format("'{}': {}", name, file));
}

// True when `node` (a pre-tokenizer or decoder) is or contains a component of `type`.
bool contains_type(const json& node, const std::string& type) {
  if (!node.is_object()) return false;
  if (node.value("type", "") == type) return true;
  for (const char* list : {"pretokenizers", "decoders", "normalizers"}) {
    if (node.contains(list) && node[list].is_array()) {
      for (const auto& child : node[list]) {
        if (contains_type(child, type)) return true;
      }
    }
  }
  return false;
}

// Collects the regex patterns of Split pre-tokenizers.
void split_patterns(const json& node, std::string& out) {
  if (!node.is_object()) return;
  if (node.value("type", "") == "Split" && node.contains("pattern") &&
      node["pattern"].is_object() && node["pattern"].contains("Regex") &&
      node["pattern"]["Regex"].is_string()) {
    out += node["pattern"]["Regex"].get<std::string>();
  }
  if (node.contains("pretokenizers") && node["pretokenizers"].is_array()) {
    for (const auto& child : node["pretokenizers"]) split_patterns(child, out);
  }
}

bool prepends_space(const json& tok) {
  // Normalizer Sequence [Prepend "▁", Replace " " -> "▁"] (tokenizers >= 0.14 Llama) or a
  // Metaspace pre-tokenizer that adds a prefix space (older exports).
  std::function<bool(const json&)> has_prepend = [&](const json& n) -> bool {
    if (!n.is_object()) return false;
    if (n.value("type", "") == "Prepend") return true;
    if (n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const auto& c : n["normalizers"]) {
        if (has_prepend(c)) return true;
      }
    }
    return false;
  };
  if (tok.contains("normalizer") && has_prepend(tok["normalizer"])) return true;
  std::function<bool(const json&)> metaspace_prefix = [&](const json& n) -> bool {
    if (!n.is_object()) return false;
    if (n.value("type", "") == "Metaspace") {
      if (n.contains("prepend_scheme") && n["prepend_scheme"].is_string()) {
        return n["prepend_scheme"].get<std::string>() != "never";
      }
      return n.value("add_prefix_space", true);
    }
    if (n.contains("pretokenizers") && n["pretokenizers"].is_array()) {
      for (const auto& c : n["pretokenizers"]) {
        if (metaspace_prefix(c)) return true;
      }
    }
    return false;
  };
  return tok.contains("pre_tokenizer") && metaspace_prefix(tok["pre_tokenizer"]);
}

bool is_byte_token(const std::string& s) {
  return s.size() == 6 && s.starts_with("<0x") && s.back() == '>' &&
         std::isxdigit(static_cast<unsigned char>(s[3])) &&
         std::isxdigit(static_cast<unsigned char>(s[4]));
}

// A special-token entry in tokenizer_config.json: "text" or {"content": "text", ...}.
std::string token_text(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

// True when the pre-tokenizer has a Digits step that isolates every digit.
bool splits_digits(const json& node) {
  if (!node.is_object()) return false;
  if (node.value("type", "") == "Digits") return node.value("individual_digits", false);
  if (node.contains("pretokenizers") && node["pretokenizers"].is_array()) {
    for (const auto& child : node["pretokenizers"]) {
      if (splits_digits(child)) return true;
    }
  }
  return false;
}

// llama.cpp's converter names the pre-tokenizer by hashing what the tokenizer makes of a test
// text; without the Python tokenizer we recognise the rules from their regexes instead.
std::string guess_pre(const json& tok, const std::string& model_type) {
  if (model_type == "qwen2") return "qwen2";
  std::string patterns;
  const json pre = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json();
  split_patterns(pre, patterns);
  if (patterns.find("\\p{N}{1,3}") != std::string::npos) return "llama3";
  if (patterns.find("(?i:'s|'t|'re|'ve|'m|'ll|'d)") != std::string::npos) return "qwen2";
  if (patterns.find("\\s?\\p{P}+") != std::string::npos) return "deepseek-coder";
  if (patterns.find("\\s?[A-Za-z") != std::string::npos) return "deepseek-llm";
  if (contains_type(pre, "Punctuation")) return "falcon";
  if (splits_digits(pre)) return "starcoder";
  return "gpt-2";
}

std::string chat_template_of(const json& config) {
  if (!config.contains("chat_template")) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {  // named templates: prefer "default"
    std::string first;
    for (const auto& entry : t) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) {
        continue;
      }
      if (entry.value("name", "") == "default") return entry["template"].get<std::string>();
      if (first.empty()) first = entry["template"].get<std::string>();
    }
    return first;
  }
  return "";
}

// model.merges, as "a b" strings (exactly one space, two non-empty parts, as the tokenizers
// library itself requires) or, from tokenizers 0.20 on, as ["a", "b"] pairs; each becomes
// "a b". Anything else (a number, a string, an object, an entry of another shape) is a
// corrupt file naming the field and the entry: it loaded silently and tokenized wrongly.
std::vector<std::string> parse_merges(const json& merges, const std::string& name) {
  if (!merges.is_array()) {
    fail(ErrorCode::kCorrupt, "'{}': tokenizer.json model.merges is a {}, not a list of merges",
         name, merges.type_name());
  }
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space != std::string::npos && space > 0 && space + 1 < text.size() &&
          text.find(' ', space + 1) == std::string::npos) {
        out.push_back(text);
        continue;
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string() && !merge[0].get_ref<const std::string&>().empty() &&
               !merge[1].get_ref<const std::string&>().empty()) {
      out.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      continue;
    }
    std::string shown = merge.dump(-1, ' ', false, json::error_handler_t::replace);
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    fail(ErrorCode::kCorrupt,
         "'{}': tokenizer.json model.merges[{}] is {}, not a merge (\"a b\" or [\"a\", \"b\"])",
         name, i, shown);
  }
  return out;
}

TokenizerData tokenizer_data(const HfTokenizerInputs& in, const std::string& name) {
  const json tok = parse_json(in.tokenizer_json, name, "tokenizer.json");
  const json config = in.tokenizer_config_json.empty()
                          ? json::object()
                          : parse_json(in.tokenizer_config_json, name, "tokenizer_config.json");
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object() ||
      !config.is_object()) {
    fail(ErrorCode::kCorrupt, "'{}': tokenizer.json has no \"model\" object", name);
  }
  const json& model = tok["model"];
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") {
    fail(ErrorCode::kUnsupported,
         "'{}': tokenizer.json model type '{}' is not supported (only BPE)", name, type);
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    fail(ErrorCode::kCorrupt, "'{}': tokenizer.json model has no vocab object", name);
  }
  // Without these checks an empty or broken vocab loaded (padded to config.json's
  // vocab_size with placeholder tokens) and the model generated garbage.
  if (model["vocab"].empty()) {
    fail(ErrorCode::kCorrupt, "'{}': tokenizer.json has an empty vocabulary (model.vocab)", name);
  }

  TokenizerData t;
  const bool byte_level =
      (tok.contains("pre_tokenizer") && contains_type(tok["pre_tokenizer"], "ByteLevel")) ||
      (tok.contains("decoder") && contains_type(tok["decoder"], "ByteLevel"));
  const bool byte_fallback = model.value("byte_fallback", false);
  if (byte_level) {
    t.kind = TokenizerKind::kByteLevelBpe;
  } else if (byte_fallback ||
             (tok.contains("decoder") && contains_type(tok["decoder"], "Replace")) ||
             prepends_space(tok)) {
    t.kind = TokenizerKind::kSentencePiece;
  } else {
    fail(ErrorCode::kUnsupported,
         "'{}': tokenizer.json BPE is neither byte-level nor SentencePiece-style (byte_fallback)",
         name);
  }
  const bool spm = t.kind == TokenizerKind::kSentencePiece;

  // Ids can be sparse and added tokens can lie past the base vocabulary.
  constexpr int64_t kMaxVocab = 1 << 24;
  std::unordered_map<int64_t, std::string> by_id;
  std::unordered_map<int64_t, bool> added_special;
  std::unordered_map<int64_t, uint8_t> added_strip;
  int64_t n = std::max(0, in.vocab_size);
  auto put = [&](const json& id_json, const std::string& text) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() >= kMaxVocab) {
      fail(ErrorCode::kCorrupt, "'{}': token '{}' has an invalid id in tokenizer.json", name, text);
    }
    const int64_t id = id_json.get<int64_t>();
    by_id[id] = text;
    n = std::max(n, id + 1);
    return id;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (id.is_number_integer() && by_id.contains(id.get<int64_t>())) {
      fail(ErrorCode::kCorrupt, "'{}': tokens '{}' and '{}' share the id {} in tokenizer.json",
           name, by_id[id.get<int64_t>()], text, id.get<int64_t>());
    }
    put(id, text);
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const auto& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
          !a.contains("id")) {
        fail(ErrorCode::kCorrupt, "'{}': malformed added_tokens entry in tokenizer.json", name);
      }
      const int64_t id = put(a["id"], a["content"].get<std::string>());
      added_special[id] = a.value("special", false);
      const auto attribute = [&](const char* key) {
        return a.contains(key) && a[key].is_boolean() && a[key].get<bool>();
      };
      added_strip[id] = static_cast<uint8_t>((attribute("lstrip") ? kStripLeft : kStripNone) |
                                             (attribute("rstrip") ? kStripRight : kStripNone));
    }
  }

  // Unused ids become placeholder tokens below. Real files leave few of them (added tokens
  // past the base vocabulary, a vocab_size padded to a multiple); a few hundred tokens whose
  // ids, or a vocab_size, reach into the millions are a corrupt file, and filling that gap
  // took 7 s and 580 MB for one 1 KiB tokenizer.json (hf_tokenizer_fuzz), gigabytes at the
  // id limit.
  constexpr int64_t kMaxUnusedIds = int64_t{1} << 16;
  const auto defined = static_cast<int64_t>(by_id.size());
  if (n - defined > std::max(defined, kMaxUnusedIds)) {
    fail(ErrorCode::kCorrupt,
         "'{}': tokenizer.json defines {} tokens but the vocabulary would span {} ids "
         "(vocab_size {}): {} unused ids is more than a real vocabulary leaves",
         name, defined, n, in.vocab_size, n - defined);
  }

  std::unordered_map<std::string, int32_t> id_of;
  t.tokens.resize(n);
  t.types.assign(n, TokenType::kNormal);
  t.scores.assign(n, spm ? kHfTokenScore : 0.0f);
  // tokenizer.json states the attributes, so no name-based guess applies (non-empty).
  t.strip.assign(n, kStripNone);
  for (const auto& [id, strip] : added_strip) t.strip[id] = strip;
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      t.tokens[i] = "[PAD" + std::to_string(i) + "]";
      t.types[i] = TokenType::kUnused;
      continue;
    }
    t.tokens[i] = it->second;
    id_of.emplace(it->second, static_cast<int32_t>(i));
    if (auto a = added_special.find(i); a != added_special.end()) {
      t.types[i] = a->second ? TokenType::kControl : TokenType::kUserDefined;
    } else if (spm && is_byte_token(it->second)) {
      t.types[i] = TokenType::kByte;
    }
  }

  if (!spm && !model.contains("merges")) {
    fail(ErrorCode::kCorrupt, "'{}': byte-level BPE tokenizer.json has no merges (model.merges)",
         name);
  }
  // Checked whichever kind reads them (the SentencePiece path ranks by score, not by merge):
  // a merges field that is no list of merges means the file is not what it claims to be.
  std::vector<std::string> merges =
      model.contains("merges") ? parse_merges(model["merges"], name) : std::vector<std::string>{};
  if (!spm) {
    t.merges = std::move(merges);
    t.pre = guess_pre(tok, in.model_type);
  } else {
    t.pre = "default";
  }

  const auto lookup = [&](const std::string& text, int32_t fallback) {
    if (text.empty()) return fallback;
    auto it = id_of.find(text);
    return it == id_of.end() ? fallback : it->second;
  };
  const auto valid = [&](int id) { return id >= 0 && id < n ? id : -1; };
  t.bos_id = lookup(token_text(config, "bos_token"), valid(in.config_bos_id));
  t.eos_id = lookup(token_text(config, "eos_token"), valid(in.config_eos_id));
  std::string unk = token_text(config, "unk_token");
  if (unk.empty() && model.contains("unk_token") && model["unk_token"].is_string()) {
    unk = model["unk_token"].get<std::string>();
  }
  t.unk_id = lookup(unk, -1);
  t.pad_id = lookup(token_text(config, "pad_token"), -1);
  const auto flag = [&](const char* key, bool fallback) {
    return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
  };
  t.add_bos = flag("add_bos_token", spm);
  t.add_eos = flag("add_eos_token", false);
  t.add_space_prefix = spm && prepends_space(tok);
  t.chat_template = chat_template_of(config);
  if (t.chat_template.empty()) t.chat_template = in.chat_template_file;
  return t;
}

}  // namespace

TokenizerData parse_hf_tokenizer(const HfTokenizerInputs& in, const std::string& name) {
  // The reads use json::value and get<>, which throw a JSON type error for a field of the
  // wrong type ("byte_fallback": 61, found by hf_tokenizer_fuzz): a corrupt file like any other.
  try {
    return tokenizer_data(in, name);
  } catch (const json::exception& e) {
    fail(ErrorCode::kCorrupt,
         "'{}': tokenizer.json or tokenizer_config.json has a field of the wrong type ({})", name,
         e.what());
  }
}

}  // namespace rapide
