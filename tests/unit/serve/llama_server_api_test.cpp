// llama-server's request shapes (serve/llama_server_api.h): the /completion defaults and
// refusals, response_fields, and /infill's prompt layout as llama.cpp's server README states
// it, on hand-built vocabularies with and without FIM tokens.
#include "serve/llama_server_api.h"

#include <gtest/gtest.h>

#include <limits>

#include "../tokenizer/tiny_vocab.h"
#include "api/api_error.h"

namespace rapide::serve::llama {
namespace {

using nlohmann::json;

std::unique_ptr<Tokenizer> vocab(const std::vector<std::string>& specials) {
  std::vector<std::pair<std::string, float>> pieces = {
      {testing::kSpace, -1.0f}, {"a", -2.0f}, {"b", -2.0f}};
  TokenizerData d = testing::spm_vocab(pieces);
  for (const std::string& s : specials) {
    d.tokens.push_back(s);
    d.scores.push_back(0.0f);
    d.types.push_back(TokenType::kControl);
  }
  return Tokenizer::create(d);
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const api::ApiError& e) {
    return e.status();
  }
  return 200;
}

TEST(LlamaServerApi, CompletionDefaultsAreLlamaServers) {
  auto tok = vocab({});
  const NativeCompletion r = parse_native_completion({{"prompt", "ab"}}, *tok, 4, 512);
  const SamplingParams& p = r.spec.sampling;
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(r.n_predict, -1);  // until the context is full
  EXPECT_EQ(p.max_tokens, std::numeric_limits<int32_t>::max());
  EXPECT_FALSE(r.spec.seed_given);
  EXPECT_EQ(r.id_slot, -1);
  EXPECT_TRUE(r.cache_prompt);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.spec.prompts.at(0), tok->encode("ab", true, true));
  EXPECT_EQ(r.generation_settings["n_predict"], -1);
}

TEST(LlamaServerApi, PromptShapes) {
  auto tok = vocab({});
  // Ids and text mixed: one prompt; a leading string gets BOS, a later one does not.
  const NativeCompletion mixed =
      parse_native_completion({{"prompt", json::array({"a", 5, "b"})}}, *tok, 4, 512);
  ASSERT_EQ(mixed.spec.prompts.size(), 1u);
  EXPECT_FALSE(mixed.batch);
  EXPECT_EQ(mixed.spec.prompts[0],
            concat({tok->encode("a", true, true), {5}, tok->encode("b", false, true)}));
  // Several prompts: a batch answered as an array.
  const NativeCompletion batch =
      parse_native_completion({{"prompt", json::array({"a", "b"})}}, *tok, 4, 512);
  EXPECT_TRUE(batch.batch);
  EXPECT_EQ(batch.spec.prompts.size(), 2u);
  const NativeCompletion lists =
      parse_native_completion({{"prompt", json::array({json::array({1, 5}), "a"})}}, *tok, 4, 512);
  EXPECT_TRUE(lists.batch);
  EXPECT_EQ(lists.spec.prompts[0], (std::vector<int32_t>{1, 5}));
}

TEST(LlamaServerApi, RefusesWhatItCannotHonour) {
  auto tok = vocab({});
  auto parse = [&](json body) {
    body["prompt"] = "a";
    return status_of([&] { parse_native_completion(body, *tok, 4, 512); });
  };
  EXPECT_EQ(parse({{"mirostat", 2}}), 400);
  EXPECT_EQ(parse({{"mirostat", 0}}), 200);  // the "off" value /props lists
  EXPECT_EQ(parse({{"dry_multiplier", 0.8}}), 400);
  EXPECT_EQ(parse({{"typical_p", 0.5}}), 400);
  EXPECT_EQ(parse({{"n_predict", 0}}), 400);
  EXPECT_EQ(parse({{"n_predict", -2}}), 400);
  EXPECT_EQ(parse({{"id_slot", 4}}), 400);  // total_slots 4
  EXPECT_EQ(parse({{"id_slot", 3}}), 200);
  EXPECT_EQ(parse({{"post_sampling_probs", true}}), 400);
  EXPECT_EQ(parse({{"n_predict", int64_t{1} << 40}}), 400);
  // Token ids past the vocabulary (or past any integer type) in logit_bias: a 400, not a 500.
  EXPECT_EQ(parse({{"logit_bias", {{"99999999999999999999", 1}}}}), 400);
  EXPECT_EQ(parse({{"logit_bias", json::array({json::array({int64_t{99999999999}, 1})})}}), 400);
  EXPECT_EQ(parse({{"logit_bias", json::array({json::array({-1, 1})})}}), 400);
  EXPECT_EQ(status_of([&] { parse_native_completion({{"n_predict", 1}}, *tok, 4, 512); }), 400);
}

TEST(LlamaServerApi, SeedLogitBiasAndProbs) {
  auto tok = vocab({});
  const NativeCompletion random =
      parse_native_completion({{"prompt", "a"}, {"seed", -1}}, *tok, 4, 512);
  EXPECT_FALSE(random.spec.seed_given);
  const NativeCompletion r = parse_native_completion(
      {{"prompt", "a"},
       {"seed", 42},
       {"n_probs", 3},
       {"temperature", -1},
       {"logit_bias", json::array({json::array({5, false}), json::array({6, 1.5})})}},
      *tok, 4, 512);
  EXPECT_TRUE(r.spec.seed_given);
  EXPECT_EQ(r.spec.sampling.seed, 42u);
  EXPECT_EQ(r.spec.sampling.n_probs, 3);
  EXPECT_FLOAT_EQ(r.spec.sampling.temperature, 0.0f);  // negative: greedy
  ASSERT_EQ(r.spec.sampling.logit_bias.size(), 2u);
  for (const TokenBias& b : r.spec.sampling.logit_bias) {
    EXPECT_FLOAT_EQ(b.bias, b.token == 5 ? -100.0f : 1.5f);
  }
}

TEST(LlamaServerApi, ResponseFieldsLiftNestedValues) {
  const json answer = {
      {"content", "x"}, {"generation_settings", {{"n_predict", 8}}}, {"stop", true}};
  const json out = select_fields(answer, {"content", "generation_settings/n_predict", "missing"});
  EXPECT_EQ(out, (json{{"content", "x"}, {"generation_settings/n_predict", 8}}));
  EXPECT_EQ(select_fields(answer, {}), answer);
}

TEST(LlamaServerApi, InfillLaysOutPrefixSuffixMiddle) {
  auto tok = vocab({"<PRE>", "<SUF>", "<MID>"});
  const FimTokens fim = find_fim_tokens("", *tok);
  ASSERT_TRUE(fim.usable());
  const int32_t pre = fim.pre, suf = fim.suf, mid = fim.mid;
  EXPECT_EQ(fim.rep, -1);
  const json body = {{"input_prefix", "a"},
                     {"input_suffix", "b"},
                     {"prompt", "ab"},
                     {"input_extra", json::array({{{"filename", "f"}, {"text", "ba"}}})}};
  // Without FIM_REP / FIM_SEP the extra context is plain text before FIM_PRE.
  const std::vector<int32_t> want = concat({{tok->bos_id()},
                                            tok->encode("ba", false, true),
                                            {pre},
                                            tok->encode("a", false, true),
                                            {suf},
                                            tok->encode("b", false, true),
                                            {mid},
                                            tok->encode("ab", false, true)});
  EXPECT_EQ(infill_prompt(body, *tok, fim), want);
}

TEST(LlamaServerApi, InfillUsesTheRepoPatternWithRepAndSep) {
  auto tok =
      vocab({"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_repo|>", "<|file_sep|>"});
  const FimTokens fim = find_fim_tokens("", *tok);
  ASSERT_TRUE(fim.usable());
  ASSERT_GE(fim.rep, 0);
  ASSERT_GE(fim.sep, 0);
  const json body = {{"input_prefix", "a"},
                     {"input_suffix", "b"},
                     {"input_extra", json::array({{{"filename", "f"}, {"text", "ba"}}})}};
  auto enc = [&](const char* s) { return tok->encode(s, false, true); };
  const std::vector<int32_t> want = concat({{tok->bos_id(), fim.rep},
                                            enc("myproject\n"),
                                            {fim.sep},
                                            enc("f\n"),
                                            enc("ba"),
                                            {fim.sep},
                                            enc("filename\n"),
                                            {fim.pre},
                                            enc("a"),
                                            {fim.suf},
                                            enc("b"),
                                            {fim.mid}});
  EXPECT_EQ(infill_prompt(body, *tok, fim), want);
}

TEST(LlamaServerApi, InfillWithoutFimTokensIsA400NamingThem) {
  auto tok = vocab({});
  const FimTokens fim = find_fim_tokens("", *tok);
  EXPECT_FALSE(fim.usable());
  try {
    infill_prompt({{"input_prefix", "a"}}, *tok, fim);
    FAIL() << "no error";
  } catch (const api::ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("FIM_PRE"), std::string::npos) << e.what();
  }
  // A malformed chunk is refused first, whatever the model.
  EXPECT_EQ(status_of([&] {
              infill_prompt({{"input_extra", json::array({{{"filename", 1}}})}}, *tok, fim);
            }),
            400);
}

}  // namespace
}  // namespace rapide::serve::llama
