// The chat templates rapide ships by name (--chat-template chatml ...): each renders like
// Python's jinja2 does (the oracle), and chatml gives the text its published format
// spells out.
#include <gtest/gtest.h>

#include "base/error.h"
#include "jinja_oracle.h"
#include "template/named_templates.h"
#include "test_paths.h"

namespace rapide {
namespace {

ChatTemplateInputs conversation() {
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Tell me a story."}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  return in;
}

TEST(NamedTemplates, ChatmlIsThePublishedFormat) {
  const ChatTemplate chatml(named_chat_template("chatml"));
  EXPECT_EQ(chatml.render(conversation()),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nTell me a story."
            "<|im_end|>\n<|im_start|>assistant\n");
}

TEST(NamedTemplates, EveryShippedTemplateRendersLikeJinja2) {
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  const std::vector<std::string> names = chat_template_names();
  for (const std::string& name : names) {
    cases.push_back(testing::oracle_case(named_chat_template(name), conversation()));
  }
  std::vector<testing::OracleResult> expected;
  try {
    expected = testing::run_oracle(cases);
  } catch (const testing::OracleUnavailable& e) {
    RAPIDE_MISSING_PREREQUISITE(e.what());
  }
  ASSERT_EQ(expected.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(expected[i].ok) << names[i] << ": " << expected[i].message;
    const testing::OracleResult ours =
        testing::render_with_rapide(named_chat_template(names[i]), conversation());
    EXPECT_EQ(testing::compare_with_oracle(ours, expected[i]), "") << names[i];
  }
}

TEST(NamedTemplates, UnknownNamesAndMissingFilesSayWhatIsShipped) {
  try {
    resolve_chat_template("no-such-template");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chatml"), std::string::npos) << e.what();
  }
  EXPECT_EQ(resolve_chat_template("llama3"), named_chat_template("llama3"));
}

}  // namespace
}  // namespace rapide
