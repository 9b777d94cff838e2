#include "serve/llama_server_api.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/ranges.h>

#include "api/api_error.h"
#include "base/error.h"
#include "formats/gguf_reader.h"

namespace rapide::serve::llama {

using api::ApiError;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message,
                      const char* code = "invalid_value") {
  throw ApiError(400, message, param, code);
}

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_or(const json& body, const char* name, double fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name), "invalid_type");
  return v->get<double>();
}

int64_t int_or(const json& body, const char* name, int64_t fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) {
    bad(name, fmt::format("'{}' must be an integer", name), "invalid_type");
  }
  return v->get<int64_t>();
}

bool bool_or(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, fmt::format("'{}' must be true or false", name), "invalid_type");
  return v->get<bool>();
}

// A sampler rapide does not have: its "off" value is accepted (clients send the defaults
// /props lists), anything else is refused, as running without it would answer differently.
void require_off(const json& body, const char* name, double off) {
  const json* v = field(body, name);
  if (!v) return;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name), "invalid_type");
  if (v->get<double>() != off) {
    bad(name, fmt::format("'{}' is not supported by rapide (only {} = off is accepted)", name, off),
        "unsupported");
  }
}

std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::string& text, bool add_bos) {
  try {
    return tokenizer.encode(text, add_bos, /*parse_special=*/true);
  } catch (const Error& e) {
    throw api::api_error_from(e, "prompt");
  }
}

// One prompt: a string, or a list mixing token ids and strings (a leading string gets BOS,
// as llama-server adds it only when the prompt starts with text).
std::vector<int32_t> one_prompt(const json& p, const Tokenizer& tokenizer) {
  if (p.is_string()) return encode(tokenizer, p.get<std::string>(), true);
  if (!p.is_array()) {
    bad("prompt", p.is_object()
                      ? "multimodal prompt objects are not supported by rapide"
                      : "each prompt must be a string or a list of token ids and strings");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < p.size(); ++i) {
    const json& item = p[i];
    if (item.is_string()) {
      const std::vector<int32_t> part = encode(tokenizer, item.get<std::string>(), i == 0);
      ids.insert(ids.end(), part.begin(), part.end());
    } else if (item.is_number_integer() && item.get<int64_t>() >= 0 &&
               item.get<int64_t>() < tokenizer.vocab_size()) {
      ids.push_back(item.get<int32_t>());
    } else {
      bad("prompt",
          fmt::format("prompt token ids must be integers in [0, {})", tokenizer.vocab_size()));
    }
  }
  return ids;
}

// llama-server's prompt shapes: "text"; [ids and strings] (one prompt); ["a", "b"] or
// [[ids], "text", ...] (several prompts, answered as an array).
std::vector<std::vector<int32_t>> read_prompts(const json& prompt, const Tokenizer& tokenizer,
                                               bool& batch) {
  batch = false;
  if (prompt.is_array() && !prompt.empty()) {
    const bool all_strings =
        std::all_of(prompt.begin(), prompt.end(), [](const json& p) { return p.is_string(); });
    const bool has_list =
        std::any_of(prompt.begin(), prompt.end(), [](const json& p) { return !p.is_primitive(); });
    if ((all_strings && prompt.size() > 1) || has_list) {
      batch = true;
      std::vector<std::vector<int32_t>> prompts;
      for (const json& p : prompt) prompts.push_back(one_prompt(p, tokenizer));
      return prompts;
    }
  }
  if (prompt.is_array() && prompt.empty()) bad("prompt", "'prompt' must not be empty");
  return {one_prompt(prompt, tokenizer)};
}

// llama-server's logit_bias: [[token id or text, bias or false], ...] or {"id": bias}. Text
// biases every token of its encoding; false bans (the engine's -100 is a ban in practice).
json openai_logit_bias(const json& v, const Tokenizer& tokenizer) {
  constexpr double kBan = -100.0;
  json out = json::object();
  auto add = [&](const json& key, const json& bias) {
    double value = 0.0;
    if (bias.is_boolean() && !bias.get<bool>()) {
      value = kBan;
    } else if (bias.is_number()) {
      value = std::clamp(bias.get<double>(), -100.0, 100.0);
    } else {
      bad("logit_bias", "a logit_bias value must be a number or false");
    }
    std::vector<int32_t> ids;
    auto id_of = [&](int64_t id) {
      if (id < 0 || id >= tokenizer.vocab_size()) {
        bad("logit_bias",
            fmt::format("logit_bias token ids must be in [0, {})", tokenizer.vocab_size()));
      }
      return static_cast<int32_t>(id);
    };
    if (key.is_number_integer()) {
      ids.push_back(id_of(key.is_number_unsigned() &&
                                  key.get<uint64_t>() >
                                      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                              ? -1
                              : key.get<int64_t>()));
    } else if (key.is_string()) {
      const std::string& s = key.get_ref<const std::string&>();
      const bool numeric = !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
      // A numeric key is an id (OpenAI's object form); too many digits is no id at all.
      ids = numeric ? std::vector<int32_t>{id_of(s.size() > 10 ? -1 : std::stoll(s))}
                    : encode(tokenizer, s, false);
    } else {
      bad("logit_bias", "a logit_bias key must be a token id or a string");
    }
    for (int32_t id : ids) {
      const std::string k = std::to_string(id);
      out[k] = out.value(k, 0.0) + value;
    }
  };
  if (v.is_object()) {
    for (const auto& [key, bias] : v.items()) add(json(key), bias);
  } else if (v.is_array()) {
    for (const json& pair : v) {
      if (!pair.is_array() || pair.size() != 2) {
        bad("logit_bias", "logit_bias must be [[token, bias], ...] or {\"token\": bias}");
      }
      add(pair[0], pair[1]);
    }
  } else {
    bad("logit_bias", "logit_bias must be [[token, bias], ...] or {\"token\": bias}");
  }
  return out;
}

json token_probs(int32_t id, float logprob, const Tokenizer& tokenizer) {
  const std::string piece = tokenizer.token_to_piece(id, true);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  // Invalid UTF-8 (a lone byte-fallback piece) is replaced when the body is dumped.
  return {{"id", id}, {"token", piece}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

json probs_entry(const api::LogprobEntry& e, const Tokenizer& tokenizer) {
  json entry = token_probs(e.token, e.logprob, tokenizer);
  json top = json::array();
  for (const TokenLogprob& t : e.top) top.push_back(token_probs(t.token, t.logprob, tokenizer));
  entry["top_logprobs"] = std::move(top);
  return entry;
}

double per_second(int64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

}  // namespace

json default_params_json() {
  return {{"n_predict", -1},
          {"seed", NativeDefaults::kRandomSeed},
          {"temperature", NativeDefaults::kTemperature},
          {"dynatemp_range", 0.0},
          {"dynatemp_exponent", 1.0},
          {"top_k", NativeDefaults::kTopK},
          {"top_p", NativeDefaults::kTopP},
          {"min_p", NativeDefaults::kMinP},
          {"xtc_probability", 0.0},
          {"typical_p", 1.0},
          {"repeat_last_n", NativeDefaults::kRepeatLastN},
          {"repeat_penalty", NativeDefaults::kRepeatPenalty},
          {"presence_penalty", 0.0},
          {"frequency_penalty", 0.0},
          {"dry_multiplier", 0.0},
          {"mirostat", 0},
          {"stop", json::array()},
          {"max_tokens", -1},
          {"n_keep", 0},
          {"ignore_eos", false},
          {"stream", false},
          {"n_probs", 0},
          {"min_keep", 0},
          {"grammar", ""},
          {"samplers", {"penalties", "top_k", "top_p", "min_p", "temperature"}},
          {"timings_per_token", false}};
}

NativeCompletion parse_native_completion(const json& body, const Tokenizer& tokenizer,
                                         int total_slots, int n_ctx,
                                         const std::vector<int32_t>* prompt_override) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  NativeCompletion r;
  // Samplers rapide does not implement, at their llama-server "off" values.
  require_off(body, "mirostat", 0);
  require_off(body, "dry_multiplier", 0);
  require_off(body, "xtc_probability", 0);
  require_off(body, "typical_p", 1);
  require_off(body, "dynatemp_range", 0);
  require_off(body, "top_n_sigma", -1);
  if (const json* lora = field(body, "lora"); lora && !(lora->is_array() && lora->empty())) {
    bad("lora", "LoRA adapters are not supported by rapide", "unsupported");
  }
  const int64_t n_cmpl = int_or(body, "n_cmpl", 1);

  // The OpenAI completions body with the same meaning, parsed by the one parser rapide has,
  // so every range check and the engine's admission rules are written once.
  json oa = json::object();
  int64_t n_predict = int_or(body, "n_predict", int_or(body, "max_tokens", -1));
  if (n_predict < -1 || n_predict > std::numeric_limits<int32_t>::max()) {
    bad("n_predict", fmt::format("'n_predict' must be -1 (unlimited) or a count in [1, {}]",
                                 std::numeric_limits<int32_t>::max()));
  }
  if (n_predict == 0) {
    bad("n_predict", "'n_predict': 0 (evaluate the prompt only) is not supported by rapide",
        "unsupported");
  }
  r.n_predict = static_cast<int>(std::min<int64_t>(n_predict, std::numeric_limits<int>::max()));
  oa["max_tokens"] = n_predict < 0 ? std::numeric_limits<int32_t>::max() : n_predict;
  // A negative temperature is llama-server's greedy (with probabilities still reported).
  oa["temperature"] = std::max(0.0, number_or(body, "temperature", NativeDefaults::kTemperature));
  const int64_t top_k = int_or(body, "top_k", NativeDefaults::kTopK);
  oa["top_k"] = top_k <= 0 ? 0 : top_k;
  oa["top_p"] = number_or(body, "top_p", NativeDefaults::kTopP);
  oa["min_p"] = number_or(body, "min_p", NativeDefaults::kMinP);
  oa["repetition_penalty"] = number_or(body, "repeat_penalty", NativeDefaults::kRepeatPenalty);
  oa["presence_penalty"] = number_or(body, "presence_penalty", 0.0);
  oa["frequency_penalty"] = number_or(body, "frequency_penalty", 0.0);
  oa["ignore_eos"] = bool_or(body, "ignore_eos", false);
  oa["stream"] = bool_or(body, "stream", false);
  oa["n"] = n_cmpl;
  if (const json* stop = field(body, "stop")) oa["stop"] = *stop;
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "'seed' must be an integer", "invalid_type");
    // -1 (and llama-server's own marker 0xFFFFFFFF) mean "a random seed".
    const bool random = seed->is_number_unsigned() ? seed->get<uint64_t>() == 0xFFFFFFFFull
                                                   : seed->get<int64_t>() == -1;
    if (!random) oa["seed"] = *seed;
  }
  if (const json* bias = field(body, "logit_bias"))
    oa["logit_bias"] = openai_logit_bias(*bias, tokenizer);
  if (const json* grammar = field(body, "grammar")) oa["grammar"] = *grammar;
  if (const json* schema = field(body, "json_schema")) {
    oa["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "json_schema"}, {"schema", *schema}}}};
  }
  if (prompt_override) {
    oa["prompt"] = json::array({*prompt_override});
  } else {
    const json* prompt = field(body, "prompt");
    if (!prompt) bad("prompt", "'prompt' is required", "missing_field");
    oa["prompt"] = read_prompts(*prompt, tokenizer, r.batch);
  }
  r.spec = api::parse_completion_request(oa, tokenizer);

  const int64_t n_probs = int_or(body, "n_probs", 0);
  if (n_probs < 0 || n_probs > tokenizer.vocab_size()) {
    bad("n_probs", fmt::format("'n_probs' must be in [0, {}]", tokenizer.vocab_size()));
  }
  if (bool_or(body, "post_sampling_probs", false)) {
    bad("post_sampling_probs", "post_sampling_probs is not supported by rapide", "unsupported");
  }
  r.n_probs = static_cast<int>(n_probs);
  if (r.n_probs > 0) {
    r.spec.logprobs = true;  // keep the entries (api::ChoiceOutcome::add)
    r.spec.sampling.logprobs = true;
    r.spec.sampling.n_probs = r.n_probs;
  }
  r.return_tokens = bool_or(body, "return_tokens", false);
  r.cache_prompt = bool_or(body, "cache_prompt", true);
  const int64_t slot = int_or(body, "id_slot", int_or(body, "slot_id", -1));
  if (slot < -1 || slot >= total_slots) {
    bad("id_slot", fmt::format("'id_slot' must be -1 (any) or in [0, {})", total_slots));
  }
  r.id_slot = static_cast<int>(slot);
  if (const json* fields = field(body, "response_fields")) {
    if (!fields->is_array()) bad("response_fields", "'response_fields' must be a list of names");
    for (const json& f : *fields) {
      if (!f.is_string()) bad("response_fields", "'response_fields' must be a list of names");
      r.response_fields.push_back(f.get<std::string>());
    }
  }

  const SamplingParams& p = r.spec.sampling;
  json s = default_params_json();
  s["n_predict"] = r.n_predict;
  s["max_tokens"] = r.n_predict;
  s["seed"] = p.seed;
  s["temperature"] = p.temperature;
  s["top_k"] = p.top_k;
  s["top_p"] = p.top_p;
  s["min_p"] = p.min_p;
  s["repeat_penalty"] = p.repetition_penalty;
  s["repeat_last_n"] = p.penalty_last_n;
  s["presence_penalty"] = p.presence_penalty;
  s["frequency_penalty"] = p.frequency_penalty;
  s["stop"] = p.stop;
  s["ignore_eos"] = p.ignore_eos;
  s["stream"] = r.spec.stream;
  s["n_probs"] = r.n_probs;
  s["n_ctx"] = n_ctx;
  s["cache_prompt"] = r.cache_prompt;
  s["id_slot"] = r.id_slot;
  if (const json* grammar = field(body, "grammar")) s["grammar"] = *grammar;
  r.generation_settings = std::move(s);
  return r;
}

json completion_json(const NativeCompletion& request, size_t index, const FinishedPrompt& done,
                     const std::vector<int32_t>& prompt_tokens, const Tokenizer& tokenizer,
                     const std::string& model, int n_ctx, bool streamed) {
  const api::ChoiceOutcome& c = *done.outcome;
  // Why it stopped, in llama-server's words: a stop string ("word", named), an
  // end-of-generation or stop token ("eos"), or the n_predict / context limit ("limit").
  std::string stop_type = "limit";
  std::string stopping_word;
  if (c.reason == FinishReason::kStop) {
    // The engine names the stop string that matched (TokenEvent::stop_string).
    stopping_word = c.stop_string;
    stop_type = stopping_word.empty() ? "eos" : "word";
  }
  const int32_t predicted = c.completion_tokens;
  const int32_t evaluated = c.prompt_tokens;
  const int32_t cached = c.cached_prompt_tokens;
  const int32_t prompt_n = std::max(0, evaluated - cached);
  const double prompt_ms = done.prompt_seconds * 1e3;
  const double predicted_ms = done.predict_seconds * 1e3;
  json timings = {{"cache_n", cached},
                  {"prompt_n", prompt_n},
                  {"prompt_ms", prompt_ms},
                  {"prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0.0},
                  {"prompt_per_second", per_second(prompt_n, done.prompt_seconds)},
                  {"predicted_n", predicted},
                  {"predicted_ms", predicted_ms},
                  {"predicted_per_token_ms", predicted > 0 ? predicted_ms / predicted : 0.0},
                  {"predicted_per_second", per_second(predicted, done.predict_seconds)}};
  json tokens = json::array();
  if (request.return_tokens && !streamed) {
    // The tokens of the content: a final EOS / stop token added no text.
    size_t n = done.tokens.size();
    if (c.reason == FinishReason::kStop && n > 0 && stop_type == "eos") --n;
    for (size_t i = 0; i < n; ++i) tokens.push_back(done.tokens[i]);
  }
  json out = {{"index", index},
              {"content", streamed ? std::string() : c.text},
              {"tokens", std::move(tokens)},
              {"id_slot", request.id_slot},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", predicted},
              {"tokens_evaluated", evaluated},
              {"generation_settings", request.generation_settings},
              {"prompt", tokenizer.decode(prompt_tokens, false, true)},
              {"has_new_line", c.text.find('\n') != std::string::npos},
              {"truncated", evaluated + predicted >= n_ctx},
              {"stop_type", stop_type},
              {"stopping_word", stopping_word},
              {"stopped_eos", stop_type == "eos"},
              {"stopped_word", stop_type == "word"},
              {"stopped_limit", stop_type == "limit"},
              {"tokens_cached", cached},
              {"timings", std::move(timings)}};
  if (request.n_probs > 0 && !streamed) {
    json probs = json::array();
    for (const api::LogprobEntry& e : c.logprobs) probs.push_back(probs_entry(e, tokenizer));
    out["completion_probabilities"] = std::move(probs);
  }
  return out;
}

json partial_json(const NativeCompletion& request, size_t index, const std::string& text,
                  int32_t token, int32_t tokens_predicted, int32_t tokens_evaluated,
                  const api::LogprobEntry* probs, const Tokenizer& tokenizer) {
  json out = {{"index", index},
              {"content", text},
              {"tokens", json::array({token})},
              {"stop", false},
              {"id_slot", request.id_slot},
              {"tokens_predicted", tokens_predicted},
              {"tokens_evaluated", tokens_evaluated}};
  if (request.n_probs > 0 && probs) {
    out["completion_probabilities"] = json::array({probs_entry(*probs, tokenizer)});
  }
  return out;
}

json select_fields(const json& answer, const std::vector<std::string>& fields) {
  if (fields.empty()) return answer;
  json out = json::object();
  for (const std::string& f : fields) {
    const json* at = &answer;
    size_t start = 0;
    bool found = true;
    while (found) {
      const size_t slash = f.find('/', start);
      const std::string key = f.substr(start, slash == std::string::npos ? slash : slash - start);
      if (!at->is_object() || !at->contains(key)) {
        found = false;
        break;
      }
      at = &(*at)[key];
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (found) out[f] = *at;  // missing fields are left out, as llama-server does
  }
  return out;
}

FimTokens find_fim_tokens(const std::string& gguf_path, const Tokenizer& tokenizer) {
  FimTokens fim;
  const int n = tokenizer.vocab_size();
  if (!gguf_path.empty()) {
    try {
      const GgufFile gguf = GgufFile::open(gguf_path);
      auto id = [&](const char* key) {
        if (!gguf.has(key)) return -1;
        const uint32_t v = gguf.get_u32_or(key, UINT32_MAX);
        return v < static_cast<uint32_t>(n) ? static_cast<int32_t>(v) : -1;
      };
      fim.pre = id("tokenizer.ggml.fim_pre_token_id");
      fim.suf = id("tokenizer.ggml.fim_suf_token_id");
      fim.mid = id("tokenizer.ggml.fim_mid_token_id");
      fim.pad = id("tokenizer.ggml.fim_pad_token_id");
      fim.rep = id("tokenizer.ggml.fim_rep_token_id");
      fim.sep = id("tokenizer.ggml.fim_sep_token_id");
    } catch (const std::exception&) {
      // Not a GGUF file (safetensors, the demo model): the token texts below decide.
    }
  }
  // The spellings llama.cpp's vocabulary loader looks for when the keys are absent.
  const auto& texts = tokenizer.data().tokens;
  auto by_text = [&](int32_t& slot, std::initializer_list<const char*> names) {
    if (slot >= 0) return;
    for (const char* name : names) {
      const auto it = std::find(texts.begin(), texts.end(), name);
      if (it != texts.end()) {
        slot = static_cast<int32_t>(it - texts.begin());
        return;
      }
    }
  };
  by_text(fim.pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
                    "<|code_prefix|>"});
  by_text(fim.suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>",
                    "<|code_suffix|>"});
  by_text(fim.mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>",
                    "<|code_middle|>"});
  by_text(fim.pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
  by_text(fim.rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  by_text(fim.sep, {"<|file_sep|>", "<file_sep>", "<|file_separator|>"});
  return fim;
}

std::vector<int32_t> infill_prompt(const json& body, const Tokenizer& tokenizer,
                                   const FimTokens& fim) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  auto text = [&](const char* name) {
    const json* v = field(body, name);
    if (!v) return std::string();
    if (!v->is_string()) bad(name, fmt::format("'{}' must be a string", name), "invalid_type");
    return v->get<std::string>();
  };
  const std::string prefix = text("input_prefix");
  const std::string suffix = text("input_suffix");
  const std::string middle = text("prompt");
  std::vector<std::pair<std::string, std::string>> extra;  // filename, text
  if (const json* chunks = field(body, "input_extra")) {
    if (!chunks->is_array()) bad("input_extra", "'input_extra' must be a list of {filename, text}");
    for (const json& c : *chunks) {
      if (!c.is_object() || !c.contains("filename") || !c["filename"].is_string() ||
          !c.contains("text") || !c["text"].is_string()) {
        bad("input_extra",
            "each 'input_extra' chunk must be {\"filename\": string, \"text\": string}");
      }
      extra.emplace_back(c["filename"].get<std::string>(), c["text"].get<std::string>());
    }
  }
  if (!fim.usable()) {
    std::vector<std::string> missing;
    if (fim.pre < 0) missing.push_back("FIM_PRE");
    if (fim.suf < 0) missing.push_back("FIM_SUF");
    if (fim.mid < 0) missing.push_back("FIM_MID");
    throw ApiError(400,
                   fmt::format("this model cannot infill: its vocabulary has no fill-in-the-middle "
                               "tokens ({} missing; tokenizer.ggml.fim_pre_token_id etc.)",
                               fmt::join(missing, ", ")),
                   {}, "unsupported");
  }
  std::vector<int32_t> ids;
  if (tokenizer.data().add_bos && tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
  auto append = [&](const std::string& s) {
    const std::vector<int32_t> part = encode(tokenizer, s, false);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  if (fim.rep >= 0 && fim.sep >= 0) {
    ids.push_back(fim.rep);
    append("myproject\n");
    for (const auto& [name, chunk] : extra) {
      ids.push_back(fim.sep);
      append(name + "\n");
      append(chunk);
    }
    ids.push_back(fim.sep);
    append("filename\n");
  } else {
    for (const auto& [name, chunk] : extra) append(chunk);
  }
  ids.push_back(fim.pre);
  append(prefix);
  ids.push_back(fim.suf);
  append(suffix);
  ids.push_back(fim.mid);
  append(middle);
  return ids;
}

}  // namespace rapide::serve::llama
