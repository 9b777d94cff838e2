#include "api/structured_output.h"

#include <list>
#include <mutex>
#include <unordered_map>

#include "api/api_error.h"
#include "base/error.h"
#include "grammar/cost.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"

namespace rapide::api {

using nlohmann::json;

namespace {

// Least recently used constraints by grammar text.
class ConstraintCache {
 public:
  std::shared_ptr<const grammar::Constraint> get(const std::string& gbnf) {
    {
      std::lock_guard lock(mutex_);
      const auto it = index_.find(gbnf);
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    // Compiled outside the lock: a large grammar must not stall other requests. The cost
    // model runs here, on the request's worker, so a grammar too expensive to follow is a 400
    // before the engine sees it (`rapide batch` parses its lines through the same call).
    grammar::Grammar compiled = grammar::parse_gbnf(gbnf);
    grammar::check_cost(compiled);
    auto constraint = std::make_shared<const grammar::Constraint>(std::move(compiled), gbnf);
    std::lock_guard lock(mutex_);
    if (index_.count(gbnf) == 0) {
      order_.emplace_front(gbnf, constraint);
      index_[gbnf] = order_.begin();
      if (order_.size() > kCapacity) {
        index_.erase(order_.back().first);
        order_.pop_back();
      }
    }
    return constraint;
  }

 private:
  static constexpr size_t kCapacity = 64;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const grammar::Constraint>>> order_;
  std::unordered_map<std::string, decltype(order_)::iterator> index_;
};

ConstraintCache& cache() {
  static ConstraintCache instance;
  return instance;
}

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param, "invalid_value");
}

// Runs a translation, turning its errors into a 400 about `param`.
template <typename F>
std::string translate(const std::string& param, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("{}: {}", param, e.what()), param,
                   e.code() == ErrorCode::kUnsupported ? "unsupported" : "invalid_value");
  }
}

std::string response_format_gbnf(const json& format) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    bad("response_format", "'response_format' must be an object with a string 'type'");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return "";
  if (type == "json_object") return grammar::json_object_gbnf();
  if (type != "json_schema") {
    bad("response_format",
        fmt::format("response_format type '{}' is not one of text, json_object, json_schema",
                    type));
  }
  const auto spec = format.find("json_schema");
  if (spec == format.end() || !spec->is_object()) {
    bad("response_format", "response_format json_schema needs a 'json_schema' object");
  }
  if (spec->contains("name") && !(*spec)["name"].is_string()) {
    bad("response_format", "json_schema.name must be a string");
  }
  if (spec->contains("strict") && !(*spec)["strict"].is_boolean() && !(*spec)["strict"].is_null()) {
    bad("response_format", "json_schema.strict must be a boolean");
  }
  const auto schema = spec->find("schema");
  // OpenAI allows a missing schema: any JSON object then.
  if (schema == spec->end() || schema->is_null()) return grammar::json_object_gbnf();
  return translate("response_format", [&] { return grammar::json_schema_gbnf(*schema); });
}

}  // namespace

std::shared_ptr<const grammar::Constraint> constraint_for_gbnf(const std::string& gbnf,
                                                               const std::string& param) {
  try {
    return cache().get(gbnf);
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("{}: {}", param, e.what()), param, "invalid_value");
  }
}

std::shared_ptr<const grammar::Constraint> read_constraint(const json& body) {
  std::string gbnf, param;
  int given = 0;
  auto present = [&](const char* key) {
    const auto it = body.find(key);
    return it != body.end() && !it->is_null() ? &*it : nullptr;
  };
  if (const json* f = present("response_format")) {
    gbnf = response_format_gbnf(*f);
    param = "response_format";
    given += !gbnf.empty();
  }
  if (const json* g = present("grammar")) {
    if (!g->is_string() || g->get<std::string>().empty())
      bad("grammar", "'grammar' must be a non-empty GBNF string");
    gbnf = g->get<std::string>();
    param = "grammar";
    ++given;
  }
  if (const json* r = present("guided_regex")) {
    if (!r->is_string()) bad("guided_regex", "'guided_regex' must be a string");
    gbnf = translate("guided_regex", [&] { return grammar::regex_gbnf(r->get<std::string>()); });
    param = "guided_regex";
    ++given;
  }
  if (const json* c = present("guided_choice")) {
    if (!c->is_array() || c->empty())
      bad("guided_choice", "'guided_choice' must be a non-empty list of strings");
    std::vector<std::string> choices;
    for (const json& item : *c) {
      if (!item.is_string())
        bad("guided_choice", "'guided_choice' must be a non-empty list of strings");
      choices.push_back(item.get<std::string>());
    }
    gbnf = grammar::choice_gbnf(choices);
    param = "guided_choice";
    ++given;
  }
  if (given > 1) {
    bad(param, "use at most one of response_format (json), grammar, guided_regex, guided_choice");
  }
  if (gbnf.empty()) return nullptr;
  return constraint_for_gbnf(gbnf, param);
}

}  // namespace rapide::api
