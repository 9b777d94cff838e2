#include "api/openai_protocol.h"

#include <algorithm>
#include <charconv>
#include <random>

#include "api/api_error.h"
#include "api/json_limited.h"
#include "api/structured_output.h"
#include "base/error.h"

namespace rapide::api {

using nlohmann::json;

namespace {

// The field's value, or nullptr when absent or null (OpenAI treats both as "default").
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// Whether obj[key] is the string `value`; false for a missing key or any other type, where
// json::value(key, "") would throw a type error out of the request parser.
bool string_is(const json& obj, const char* key, std::string_view value) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() && it->get_ref<const std::string&>() == value;
}

[[noreturn]] void bad(const std::string& param, const std::string& message,
                      const char* code = "invalid_type") {
  throw ApiError(400, message, param, code);
}

bool read_bool(const json& body, const char* key, bool fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
  return v->get<bool>();
}

int64_t read_int(const json& body, const char* key, int64_t fallback, int64_t min, int64_t max) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) bad(key, fmt::format("'{}' must be an integer", key));
  // Values beyond int64 arrive as unsigned; they are out of every range here.
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX ? INT64_MAX : v->get<int64_t>();
  if (x < min || x > max) {
    bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, v->dump()),
        "invalid_value");
  }
  return x;
}

float read_float(const json& body, const char* key, float fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) bad(key, fmt::format("'{}' must be a number", key));
  return v->get<float>();
}

// A number OpenAI bounds tighter than the sampler does (temperature 0..2 where the CLI's
// sampler takes up to 100): the API's limit, checked here once; the sampler's own ranges
// (penalties, min_p) are checked by SamplingParams::validate.
float read_float_in(const json& body, const char* key, float fallback, float min, float max) {
  const float x = read_float(body, key, fallback);
  if (!(x >= min && x <= max)) {
    bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, min, max, body[key].dump()),
        "invalid_value");
  }
  return x;
}

// The generation limit: max_tokens (chat: max_completion_tokens wins), or llama-server's
// n_predict, where -1 means no limit but the context's end. Both given and different is a
// 400: which one the client meant cannot be guessed.
int32_t read_max_tokens(const json& body, Endpoint endpoint) {
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  // OpenAI's defaults: 16 for completions, "until the context is full" for chat.
  const int64_t default_max = endpoint == Endpoint::kCompletions ? 16 : kIntMax;
  const char* openai_key = "max_tokens";
  int64_t max_tokens = read_int(body, "max_tokens", default_max, 1, kIntMax);
  if (endpoint == Endpoint::kChat && field(body, "max_completion_tokens")) {
    openai_key = "max_completion_tokens";
    max_tokens = read_int(body, "max_completion_tokens", max_tokens, 1, kIntMax);
  }
  const json* n_predict = field(body, "n_predict");
  if (!n_predict) return static_cast<int32_t>(max_tokens);
  int64_t limit = read_int(body, "n_predict", -1, -1, kIntMax);
  if (limit == 0) {
    bad("n_predict", "'n_predict' must be -1 (no limit) or at least 1, got 0", "invalid_value");
  }
  if (limit == -1) limit = kIntMax;
  if (field(body, openai_key) && limit != max_tokens) {
    bad("n_predict",
        fmt::format("'n_predict' ({}) and '{}' ({}) disagree; give one of them", n_predict->dump(),
                    openai_key, body[openai_key].dump()),
        "invalid_value");
  }
  return static_cast<int32_t>(limit);
}

void reject_if(bool condition, const char* param, const char* what) {
  if (condition) throw ApiError(400, what, param, "unsupported");
}

SpecOverride read_speculative(const json& body) {
  SpecOverride o;
  const json* v = field(body, "speculative");
  if (!v) return o;
  if (!v->is_object()) {
    bad("speculative", "'speculative' must be an object like {\"mode\": \"ngram\", \"tokens\": 4}");
  }
  if (const json* mode = field(*v, "mode")) {
    const std::string text = mode->is_string() ? mode->get<std::string>() : std::string();
    if (text != "off" && text != "ngram" && text != "draft") {
      bad("speculative", "'speculative.mode' must be \"off\", \"ngram\" or \"draft\"",
          "invalid_value");
    }
    o.mode = parse_spec_mode(text);
  }
  if (const json* tokens = field(*v, "tokens")) {
    if (tokens->is_string() && tokens->get<std::string>() == "auto") {
      o.tokens = -1;
    } else if (tokens->is_number_integer() && tokens->get<int64_t>() >= 0 &&
               tokens->get<int64_t>() <= kMaxSpecTokens) {
      o.tokens = static_cast<int>(tokens->get<int64_t>());
    } else {
      bad("speculative",
          fmt::format("'speculative.tokens' must be \"auto\" or an integer in [0, {}], got {}",
                      kMaxSpecTokens, tokens->dump()),
          "invalid_value");
    }
  }
  return o;
}

std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> stops;
  if (!v) return stops;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) stops.push_back(v->get<std::string>());
    return stops;
  }
  if (!v->is_array()) bad("stop", "'stop' must be a string or a list of strings");
  for (const json& s : *v) {
    if (!s.is_string()) bad("stop", "'stop' must be a string or a list of strings");
    if (!s.get<std::string>().empty()) stops.push_back(s.get<std::string>());
  }
  return stops;
}

std::vector<TokenBias> read_logit_bias(const json& body, int vocab_size) {
  const json* v = field(body, "logit_bias");
  std::vector<TokenBias> biases;
  if (!v) return biases;
  if (!v->is_object()) bad("logit_bias", "'logit_bias' must map token ids to biases");
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    TokenBias b;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), b.token);
    if (ec != std::errc() || end != key.data() + key.size() || b.token < 0 ||
        b.token >= vocab_size) {
      bad("logit_bias",
          fmt::format("logit_bias key '{}' is not a token id in [0, {})", key, vocab_size));
    }
    if (!it.value().is_number()) bad("logit_bias", "logit_bias values must be numbers");
    b.bias = it.value().get<float>();
    if (!(b.bias >= -100.0f && b.bias <= 100.0f)) {
      bad("logit_bias", fmt::format("logit_bias for token {} must be in [-100, 100]", key));
    }
    biases.push_back(b);
  }
  return biases;
}

// Fields both endpoints share.
GenerationSpec parse_common(const json& body, const Tokenizer& tokenizer, Endpoint endpoint) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  GenerationSpec spec;
  spec.endpoint = endpoint;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    spec.model = m->get<std::string>();
  }
  if (const json* u = field(body, "user")) {
    if (!u->is_string()) bad("user", "'user' must be a string");
    spec.user = u->get<std::string>();
  }
  SamplingParams& p = spec.sampling;
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  p.max_tokens = read_max_tokens(body, endpoint);
  p.min_tokens = static_cast<int32_t>(read_int(body, "min_tokens", 0, 0, kIntMax));
  p.temperature = read_float_in(body, "temperature", 1.0f, 0.0f, 2.0f);
  p.top_p = read_float_in(body, "top_p", 1.0f, 0.0f, 1.0f);
  // vLLM spells "off" as -1 for top_k.
  const int64_t top_k = read_int(body, "top_k", 0, -1, kIntMax);
  p.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  p.min_p = read_float(body, "min_p", 0.0f);
  p.presence_penalty = read_float(body, "presence_penalty", 0.0f);
  p.frequency_penalty = read_float(body, "frequency_penalty", 0.0f);
  p.repetition_penalty = read_float(body, "repetition_penalty", 1.0f);
  p.ignore_eos = read_bool(body, "ignore_eos", false);
  p.stop = read_stop(body);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) bad("stop_token_ids", "'stop_token_ids' must be a list of token ids");
    p.stop_token_ids = read_token_ids(*ids, "stop_token_ids", tokenizer.vocab_size());
  }
  p.logit_bias = read_logit_bias(body, tokenizer.vocab_size());
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "'seed' must be an integer");
    p.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
    spec.seed_given = true;
  } else {
    // A fresh seed per request, as OpenAI samples differently on every call.
    p.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  }
  spec.n = static_cast<int>(read_int(body, "n", 1, 1, kMaxChoices));
  spec.stream = read_bool(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    spec.include_usage = read_bool(*options, "include_usage", false);
  }
  spec.speculative = read_speculative(body);
  const int64_t best_of = read_int(body, "best_of", spec.n, 1, kMaxChoices);
  reject_if(best_of != spec.n, "best_of", "best_of other than n is not supported");
  p.constraint = read_constraint(body);
  if (p.constraint) {
    for (const char* key : {"response_format", "grammar", "guided_regex", "guided_choice"}) {
      if (field(body, key)) spec.constraint_param = key;  // read_constraint allows one
    }
  }
  return spec;
}

// The roles OpenAI's chat API takes ("function" is its deprecated spelling of "tool"); any
// other is a 400 naming messages[i].role, as OpenAI answers, rather than text a template
// renders in some way of its own.
void check_role(const std::string& role, const std::string& where) {
  static constexpr std::string_view kRoles[] = {"system",    "developer", "user",
                                                "assistant", "tool",      "function"};
  if (std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles)) return;
  bad(where + ".role",
      fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool, function",
                  where, role),
      "invalid_value");
}

// tools, tool_choice and parallel_tool_calls (OpenAI's shapes).
void read_tools(const json& body, GenerationSpec& spec) {
  const json* tools = field(body, "tools");
  std::vector<std::string> names;
  if (tools) {
    if (!tools->is_array()) bad("tools", "'tools' must be a list");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!t.is_object() || !string_is(t, "type", "function") || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") ||
          !t["function"]["name"].is_string()) {
        bad(where, where + " must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      const json* params = field(t["function"], "parameters");
      if (params && !params->is_object())
        bad(where, where + ".function.parameters must be an object");
      names.push_back(t["function"]["name"].get<std::string>());
    }
    spec.tools = *tools;
  }
  spec.parallel_tool_calls = read_bool(body, "parallel_tool_calls", true);
  std::string choice = names.empty() ? "none" : "auto";
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        bad("tool_choice", "'tool_choice' must be none, auto, required or a function",
            "invalid_value");
      }
    } else if (c->is_object() && string_is(*c, "type", "function") && c->contains("function") &&
               (*c)["function"].is_object() && (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      spec.tool_choice_name = (*c)["function"]["name"].get<std::string>();
      choice = "named";
      if (std::find(names.begin(), names.end(), spec.tool_choice_name) == names.end()) {
        bad("tool_choice",
            fmt::format("tool_choice names '{}', which is not in 'tools'", spec.tool_choice_name),
            "invalid_value");
      }
    } else {
      bad("tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", ...}");
    }
  }
  if (choice != "none" && names.empty()) {
    bad("tool_choice", "'tool_choice' needs 'tools'", "invalid_value");
  }
  spec.parse_tool_calls = choice != "none";
  spec.tool_call_required = choice == "required" || choice == "named";
  if (spec.tool_call_required && spec.sampling.constraint) {
    bad("tool_choice",
        "a required tool call cannot be combined with response_format, grammar or guided_*",
        "invalid_value");
  }
}

void finish_sampling(GenerationSpec& spec, const Tokenizer& tokenizer) {
  SamplingParams& p = spec.sampling;
  p.logprobs = spec.logprobs;
  p.top_logprobs = spec.top_logprobs;
  try {
    p.validate(tokenizer.vocab_size());
  } catch (const Error& e) {
    throw api_error_from(e);
  }
}

}  // namespace

std::vector<int32_t> read_token_ids(const json& array, const char* param, int vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (const json& t : array) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) {
      bad(param, fmt::format("'{}' token ids must be integers in [0, {})", param, vocab_size));
    }
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

GenerationSpec parse_completion_request(const json& body, const Tokenizer& tokenizer) {
  GenerationSpec spec = parse_common(body, tokenizer, Endpoint::kCompletions);
  reject_if(read_bool(body, "echo", false), "echo", "echo is not supported");
  if (const json* suffix = field(body, "suffix")) {
    reject_if(!suffix->is_string() || !suffix->get<std::string>().empty(), "suffix",
              "suffix is not supported");
  }
  const int64_t logprobs = read_int(body, "logprobs", -1, 0, SamplingParams::kMaxTopLogprobs);
  spec.logprobs = logprobs >= 0;
  spec.top_logprobs = static_cast<int>(std::max<int64_t>(logprobs, 0));

  const json* prompt = field(body, "prompt");
  if (!prompt) throw ApiError(400, "'prompt' is required", "prompt", "missing_field");
  auto encode = [&](const std::string& text) {
    try {
      return tokenizer.encode(text, /*add_bos=*/true);
    } catch (const Error& e) {
      throw api_error_from(e, "prompt");
    }
  };
  const int vocab = tokenizer.vocab_size();
  if (prompt->is_string()) {
    spec.prompts.push_back(encode(prompt->get<std::string>()));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    spec.prompts.push_back(read_token_ids(*prompt, "prompt", vocab));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const json& item : *prompt) {
      if (item.is_string()) {
        spec.prompts.push_back(encode(item.get<std::string>()));
      } else if (item.is_array()) {
        spec.prompts.push_back(read_token_ids(item, "prompt", vocab));
      } else {
        bad("prompt", "'prompt' must be a string, a list of strings or a list of token lists");
      }
    }
  } else {
    bad("prompt", "'prompt' must be a non-empty string, list of strings or list of token ids");
  }
  for (const auto& tokens : spec.prompts) {
    if (tokens.empty()) throw ApiError(400, "a prompt is empty", "prompt", "invalid_value");
  }
  if (spec.prompts.size() * static_cast<size_t>(spec.n) > static_cast<size_t>(kMaxChoices)) {
    throw ApiError(400, fmt::format("prompts x n must be at most {}", kMaxChoices), "n",
                   "invalid_value");
  }
  finish_sampling(spec, tokenizer);
  return spec;
}

GenerationSpec parse_chat_request(const json& body, const Tokenizer& tokenizer) {
  GenerationSpec spec = parse_common(body, tokenizer, Endpoint::kChat);
  spec.logprobs = read_bool(body, "logprobs", false);
  spec.top_logprobs =
      static_cast<int>(read_int(body, "top_logprobs", 0, 0, SamplingParams::kMaxTopLogprobs));
  if (spec.top_logprobs > 0 && !spec.logprobs) {
    bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  const json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty()) {
    throw ApiError(400, "'messages' must be a non-empty list", "messages", "invalid_value");
  }
  spec.messages = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      bad(where, where + " must be an object with a string 'role'");
    }
    check_role(m["role"].get_ref<const std::string&>(), where);
    // Content as a string, or the list-of-parts form with text parts only.
    json normalized = m;
    const json* content = field(m, "content");
    if (content && content->is_array()) {
      std::string text;
      for (const json& part : *content) {
        if (!part.is_object() || !string_is(part, "type", "text") || !part.contains("text") ||
            !part["text"].is_string()) {
          reject_if(true, where.c_str(), "only text content parts are supported");
        }
        text += part["text"].get<std::string>();
      }
      normalized["content"] = text;
    } else if (content && !content->is_string()) {
      bad(where, where + ".content must be a string or a list of text parts");
    } else if (!content) {
      normalized["content"] = "";
    }
    // OpenAI's "developer" role is its newer name for "system" (instructions the model
    // follows); chat templates know only "system", and would render "developer" as a
    // speaker of its own or drop it.
    if (normalized["role"] == "developer") normalized["role"] = "system";
    spec.messages.push_back(std::move(normalized));
  }
  read_tools(body, spec);
  finish_sampling(spec, tokenizer);
  return spec;
}

const char* endpoint_name(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "chat.completions" : "completions";
}

std::optional<Endpoint> endpoint_for_path(std::string_view path) {
  if (path == "/v1/completions") return Endpoint::kCompletions;
  if (path == "/v1/chat/completions") return Endpoint::kChat;
  return std::nullopt;
}

GenerationSpec parse_request(const json& body, Endpoint endpoint, const Tokenizer& tokenizer) {
  return endpoint == Endpoint::kChat ? parse_chat_request(body, tokenizer)
                                     : parse_completion_request(body, tokenizer);
}

json parse_json_body(const std::string& body) {
  if (body.empty())
    throw ApiError(400, "the request body is empty; expected JSON", {}, "invalid_json");
  return parse_json_limited(body, "the request body");
}

}  // namespace rapide::api
