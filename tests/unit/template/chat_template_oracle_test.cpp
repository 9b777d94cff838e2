// Every real chat template in shared/chat-templates, rendered over a set of conversations, must
// give byte-identical text to Python's jinja2 configured like transformers (or fail the same
// way: the same raise_exception message, or jinja2's error message inside ours).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "jinja_oracle.h"
#include "template/chat_template.h"
#include "test_paths.h"

namespace rapide {
namespace {

using json = nlohmann::ordered_json;

const std::filesystem::path kTemplateDir = testing::shared_path("chat-templates");

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json msg(const std::string& role, const std::string& content) {
  return json{{"role", role}, {"content", content}};
}

json weather_tools() {
  return json::parse(R"([
    {"type": "function", "function": {
      "name": "get_weather",
      "description": "Get the current weather in a city.",
      "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
        "days": {"type": "integer", "description": "Forecast days", "default": 1, "maximum": 7},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels"},
        "threshold": {"type": ["number", "null"], "description": "Alert level"}
      }, "required": ["location"]}}},
    {"type": "function", "function": {
      "name": "search",
      "description": "Search the web.",
      "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"}
      }, "required": ["query"]}}}
  ])");
}

// Without union types, which send command-r's and Hermes' json_to_python_type into endless
// recursion (jinja2 itself fails on weather_tools()).
json simple_tools() {
  json tools = weather_tools();
  json& properties = tools[0]["function"]["parameters"]["properties"];
  properties.erase("threshold");
  properties.erase("tags");
  return tools;
}

// A tool-using exchange: the assistant calls a tool, gets its result, answers, the user goes on.
json tool_conversation(bool arguments_as_string) {
  json arguments = json{{"location", "Paris"}, {"days", 2}, {"threshold", 1.5}};
  json call = json{{"id", "call00001"},
                   {"type", "function"},
                   {"function",
                    {{"name", "get_weather"},
                     {"arguments", arguments_as_string ? json(arguments.dump()) : arguments}}}};
  json assistant =
      json{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}};
  json tool = json{{"role", "tool"},
                   {"tool_call_id", "call00001"},
                   {"name", "get_weather"},
                   {"content", "{\"temperature\": 21.5, \"sky\": \"clear\"}"}};
  return json::array({msg("system", "You are a weather bot."), msg("user", "Weather in Paris?"),
                      assistant, tool, msg("assistant", "It is 21.5 °C and clear."),
                      msg("user", "Thanks!")});
}

struct Conversation {
  std::string name;
  ChatTemplateInputs inputs;
};

std::vector<Conversation> conversations() {
  std::vector<Conversation> all;
  auto add = [&](std::string name, json messages, bool generation_prompt, json tools = nullptr,
                 json extra = json::object()) {
    ChatTemplateInputs in;
    in.messages = std::move(messages);
    in.tools = std::move(tools);
    in.add_generation_prompt = generation_prompt;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.extra_context = std::move(extra);
    all.push_back({std::move(name), std::move(in)});
  };
  json multi = json::array({msg("user", "Hi"), msg("assistant", "Hello! How can I help?"),
                            msg("user", "Tell me a joke.")});
  add("system_user", json::array({msg("system", "You are helpful."), msg("user", "Hello")}), true);
  add("system_user_no_prompt",
      json::array({msg("system", "You are helpful."), msg("user", "Hello")}), false);
  add("user_only", json::array({msg("user", "What is 2+2?")}), true);
  add("multi_turn", multi, true);
  add("multi_turn_no_prompt", multi, false);
  json with_system = multi;
  with_system.insert(with_system.begin(), msg("system", "Be brief."));
  add("system_multi_turn", with_system, true);
  add("unicode_quotes_newlines",
      json::array({msg("system", "  Réponds en français — s'il te plaît.\n"),
                   msg("user", "  Héllo \"wörld\" 'x'\n\tTab, 日本語, emoji 😀 <b>&amp;</b>\n\n"),
                   msg("assistant", "D'accord: \"ok\" \\ back\\slash\n"),
                   msg("user", "\n{{ not a tag }} {% x %}")}),
      true);
  add("tools", tool_conversation(false), true, weather_tools());
  add("tools_string_arguments", tool_conversation(true), true, weather_tools());
  add("tools_no_calls", json::array({msg("user", "Search for cats")}), true, weather_tools());
  add("simple_tools", tool_conversation(false), true, simple_tools());
  add("simple_tools_string_arguments", tool_conversation(true), false, simple_tools());
  add("not_alternating", json::array({msg("user", "a"), msg("user", "b")}), true);
  add("assistant_first", json::array({msg("assistant", "I start."), msg("user", "ok")}), true);
  add("empty", json::array(), true);
  add("extra_context", multi, true, nullptr,
      json{{"date_string", "01 Jan 2025"},
           {"functions", "[]"},
           {"datetime", "2025-01-01"},
           {"enable_citations", true},
           {"tools_in_user_message", false}});
  add("extra_context_tools", tool_conversation(true), true, weather_tools(),
      json{{"functions", "[{\"name\": \"get_weather\"}]"},
           {"datetime", "2025-01-01"},
           {"tools_in_user_message", false},
           {"builtin_tools", json::array({"brave_search", "wolfram_alpha"})}});
  return all;
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(kTemplateDir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(kTemplateDir)) {
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// jinja2's results for every template x conversation, from one Python process: starting
// Python costs more than rendering, and a loaded machine makes each start slower still.
const std::map<std::string, std::vector<testing::OracleResult>>& oracle_results() {
  static const auto results = [] {
    std::vector<std::string> names = template_names();
    std::vector<Conversation> convs = conversations();
    json cases = json::array();
    for (const std::string& name : names) {
      std::string source = read_file(kTemplateDir / name);
      for (const Conversation& c : convs) cases.push_back(testing::oracle_case(source, c.inputs));
    }
    std::vector<testing::OracleResult> all = testing::run_oracle(cases);
    std::map<std::string, std::vector<testing::OracleResult>> by_template;
    for (size_t t = 0; t < names.size(); ++t) {
      by_template[names[t]].assign(all.begin() + static_cast<long>(t * convs.size()),
                                   all.begin() + static_cast<long>((t + 1) * convs.size()));
    }
    return by_template;
  }();
  return results;
}

class RealTemplateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealTemplateTest, RendersLikeJinja2) {
  std::string source = read_file(kTemplateDir / GetParam());
  ASSERT_NO_THROW(ChatTemplate{source});
  std::vector<Conversation> convs = conversations();
  std::vector<testing::OracleResult> expected;
  try {
    expected = oracle_results().at(GetParam());
  } catch (const testing::OracleUnavailable& e) {
    RAPIDE_MISSING_PREREQUISITE(e.what());
  }
  ASSERT_EQ(expected.size(), convs.size());
  int rendered = 0;
  for (size_t i = 0; i < convs.size(); ++i) {
    testing::OracleResult ours = testing::render_with_rapide(source, convs[i].inputs);
    EXPECT_EQ(testing::compare_with_oracle(ours, expected[i]), "")
        << "conversation " << convs[i].name;
    rendered += expected[i].ok;
  }
  // Each template must render at least the plain conversations, not just fail like jinja2.
  EXPECT_GT(rendered, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedTemplates, RealTemplateTest, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.size() - 6);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(RealTemplateTest, AllSharedTemplatesFound) {
  RAPIDE_REQUIRE_SHARED("chat-templates");
  EXPECT_GE(template_names().size(), 17u);
}

TEST(ChatTemplateFallback, RoleLinesThenAssistantPrompt) {
  ChatTemplateInputs in;
  in.messages =
      json::array({msg("system", "Be brief."), msg("user", "Hi"),
                   json{{"role", "assistant"}, {"content", nullptr}},
                   json{{"role", "user"},
                        {"content", json::array({json{{"type", "text"}, {"text", "a"}},
                                                 json{{"type", "text"}, {"text", "b"}}})}}});
  EXPECT_EQ(ChatTemplate::render_fallback(in),
            "system: Be brief.\nuser: Hi\nassistant: \nuser: ab\nassistant:");
  in.add_generation_prompt = false;
  EXPECT_EQ(ChatTemplate::render_fallback(in),
            "system: Be brief.\nuser: Hi\nassistant: \nuser: ab\n");
}

TEST(ChatTemplateErrors, RaiseExceptionMessageIsVerbatim) {
  ChatTemplate t(
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
      "}}");
  try {
    t.render({});
    FAIL() << "expected an exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplateErrors, RenderErrorNamesTheLine) {
  ChatTemplate t("line one\n{{ messages[0].role }}\n{{ undefined_thing.x }}");
  try {
    t.render({});
    FAIL() << "expected an exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat template line 2: list object has no element 0");
  }
}

TEST(ChatTemplateErrors, SyntaxErrorNamesLineAndColumn) {
  try {
    ChatTemplate t("ok\n{% if x %}never closed");
    FAIL() << "expected an exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("endif"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ChatTemplate("{{ x "), Error);
  EXPECT_THROW(ChatTemplate("{% frobnicate %}"), Error);
  EXPECT_THROW(ChatTemplate("{{ 'unterminated }}"), Error);
}

}  // namespace
}  // namespace rapide
