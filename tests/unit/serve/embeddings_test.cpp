// /v1/embeddings' bounds (issue 53, N3): the request caps (inputs, total tokens, context) as
// 400s with OpenAI-style codes, the pass plan (no pass over --max-batch-tokens tokens, no
// group reserving KV beyond it), vectors that do not depend on the pass size, and a job that
// stops at its next pass once cancelled, in the engine too, without answering.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "api/api_error.h"
#include "base/error.h"
#include "engine/engine.h"
#include "serve/demo_model.h"
#include "serve/embeddings.h"

namespace rapide::serve {
namespace {

using nlohmann::json;

class EmbeddingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::make_shared<const ModelFile>(make_demo_model());
    tokenizer_ = Tokenizer::create(file_->tokenizer);
  }
  // The 400 that parsing `body` throws (a test failure when it throws none).
  api::ApiError refusal(const json& body, int max_context = 2048) const {
    try {
      parse_embedding_inputs(body, *tokenizer_, max_context);
    } catch (const api::ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "accepted: " << body.dump().substr(0, 100);
    return api::ApiError(200, "accepted");
  }
  static json ids(size_t n) { return json(std::vector<int>(n, 5)); }

  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(EmbeddingsTest, AtMost2048Inputs) {
  EXPECT_EQ(
      parse_embedding_inputs({{"input", std::vector<std::string>(2048, "h")}}, *tokenizer_, 2048)
          .size(),
      2048u);
  const api::ApiError e = refusal({{"input", std::vector<std::string>(2049, "h")}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "too_many_inputs");
  EXPECT_EQ(e.param(), "input");
  EXPECT_NE(std::string(e.what()).find("2049"), std::string::npos) << e.what();
  // Counted before anything is tokenized: the same answer when the items are not even valid.
  json bad = json::array();
  for (int i = 0; i < 2049; ++i) bad.push_back(json::object());
  EXPECT_EQ(refusal({{"input", bad}}).code(), "too_many_inputs");
  // One list of ids is one input, however long.
  EXPECT_EQ(parse_embedding_inputs({{"input", ids(2049)}}, *tokenizer_, 4096).size(), 1u);
}

TEST_F(EmbeddingsTest, AtMost300kTokensInAll) {
  json within = json::array(), beyond = json::array();
  for (int i = 0; i < 2000; ++i) within.push_back(ids(150));  // exactly 300,000
  EXPECT_EQ(parse_embedding_inputs({{"input", within}}, *tokenizer_, 2048).size(), 2000u);
  within.push_back(ids(1));
  const api::ApiError e = refusal({{"input", within}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "too_many_tokens");
  EXPECT_NE(std::string(e.what()).find("300000"), std::string::npos) << e.what();
  // Text counts its tokens (BOS included) the same way.
  const std::string text(2000, 'x');
  const size_t per_text = tokenizer_->encode(text, true).size();
  ASSERT_GE(per_text, 147u);  // 2048 of them pass 300,000
  for (size_t n = 0; n * per_text <= 300000; ++n) beyond.push_back(text);
  EXPECT_EQ(refusal({{"input", beyond}}).code(), "too_many_tokens");
}

TEST_F(EmbeddingsTest, EachInputWithinTheContext) {
  EXPECT_EQ(parse_embedding_inputs({{"input", ids(64)}}, *tokenizer_, 64).size(), 1u);
  ASSERT_GT(tokenizer_->encode(std::string(200, 'x'), true).size(), 64u);
  for (const json& input : {ids(65), json::array({ids(3), ids(65)}), json(std::string(200, 'x'))}) {
    const api::ApiError e = refusal({{"input", input}}, 64);
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "context_length_exceeded") << input.dump().substr(0, 40);
  }
  EXPECT_EQ(refusal({{"input", json::array({ids(2), json::array()})}}).code(), "invalid_value");
  EXPECT_EQ(refusal({{"input", 5}}).code(), "invalid_type");
  EXPECT_EQ(refusal({{"input", json::array({-1})}}).code(), "invalid_type");  // as prompts
}

// encoding_format "base64" is OpenAI's: base64 of the little-endian float32 bytes (expected
// strings from Python's base64.b64encode(struct.pack('<3f', ...)), padding included.
TEST(EmbeddingEncodingTest, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_float32(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(base64_float32(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_float32(std::vector<float>{0.5f, 0.25f, -0.125f}), "AAAAPwAAgD4AAAC+");
  const json body =
      embeddings_response({{1.0f}, {0.5f, 0.25f, -0.125f}}, 4, "m", EmbeddingEncoding::kBase64);
  EXPECT_EQ(body["data"][0]["embedding"], "AACAPw==");
  EXPECT_EQ(body["data"][1]["embedding"], "AAAAPwAAgD4AAAC+");
  EXPECT_TRUE(embeddings_response({{1.0f}}, 1, "m")["data"][0]["embedding"].is_array());
}

TEST(EmbeddingEncodingTest, FormatsAndDimensions) {
  EXPECT_EQ(parse_embedding_encoding(json{{"input", "x"}}, 64), EmbeddingEncoding::kFloat);
  EXPECT_EQ(parse_embedding_encoding(json{{"encoding_format", "float"}}, 64),
            EmbeddingEncoding::kFloat);
  EXPECT_EQ(parse_embedding_encoding(json{{"encoding_format", "base64"}}, 64),
            EmbeddingEncoding::kBase64);
  EXPECT_EQ(parse_embedding_encoding(json{{"dimensions", 64}}, 64), EmbeddingEncoding::kFloat);
  auto refused = [](const json& body) -> std::string {
    try {
      parse_embedding_encoding(body, 64);
    } catch (const api::ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.param() + ": " + e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refused({{"encoding_format", "binary"}}).rfind("encoding_format: ", 0), 0u);
  EXPECT_EQ(refused({{"dimensions", "8"}}).rfind("dimensions: ", 0), 0u);
  EXPECT_EQ(refused({{"dimensions", 0}}).rfind("dimensions: ", 0), 0u);
  // Shortening is refused with the reason: the model is not trained for it.
  const std::string shorter = refused({{"dimensions", 8}});
  EXPECT_EQ(shorter.rfind("dimensions: ", 0), 0u) << shorter;
  EXPECT_NE(shorter.find("Matryoshka"), std::string::npos) << shorter;
  EXPECT_NE(shorter.find("may only be 64"), std::string::npos) << shorter;
}

TEST_F(EmbeddingsTest, GroupsStayWithinThePassBudgetAndCoverEveryInputOnce) {
  std::vector<std::vector<int32_t>> inputs;
  for (const int n : {700, 3, 1, 64, 64, 300, 5, 2, 129, 128, 1})
    inputs.emplace_back(static_cast<size_t>(n), 7);
  const int budget = 256;
  std::vector<int> seen(inputs.size(), 0);
  for (const EmbeddingGroup& g : plan_embedding_groups(inputs, budget)) {
    size_t longest = 0;
    for (const size_t i : g.inputs) {
      ++seen[i];
      longest = std::max(longest, inputs[i].size());
    }
    EXPECT_EQ(g.longest, longest);
    // Several inputs share a pass only when it, padding included, fits the budget.
    if (g.inputs.size() > 1) {
      EXPECT_LE(g.inputs.size() * g.longest, size_t{budget});
    }
  }
  EXPECT_EQ(seen, std::vector<int>(inputs.size(), 1));
  // Many short inputs share passes (a pass per input would be thousands of passes).
  EXPECT_EQ(plan_embedding_groups(std::vector<std::vector<int32_t>>(2048, {1, 2}), 512).size(), 8u);
}

TEST_F(EmbeddingsTest, PassesOfAtMostTheBudgetGiveTheSameVectors) {
  Embedder embedder(file_, Pooling::kMean);
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> inputs;
  for (const int n : {300, 5, 40, 17}) {
    std::vector<int32_t> tokens;
    for (int p = 0; p < n; ++p) tokens.push_back(1 + (p * 37) % 200);
    inputs.push_back(tokens);
  }
  const auto whole = embedder.embed(inputs, pool, 2048);
  std::vector<std::vector<float>> sliced;
  auto job = embedder.job(inputs, 64, nullptr,
                          [&](std::vector<std::vector<float>> v, std::exception_ptr error) {
                            EXPECT_FALSE(error);
                            sliced = std::move(v);
                          });
  while (!job->run_slice(pool)) {
  }
  // 300 tokens in passes of 64: 5; 5 and 17 share one (2 x 17 <= 64), 40 runs alone
  // (3 x 40 > 64).
  EXPECT_EQ(job->passes(), 5 + 2);
  ASSERT_EQ(sliced.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_EQ(sliced[i].size(), whole[i].size());
    for (size_t d = 0; d < whole[i].size(); ++d) EXPECT_NEAR(sliced[i][d], whole[i][d], 1e-4);
  }
}

TEST_F(EmbeddingsTest, CancelledJobStopsAtItsNextPassWithoutAnswering) {
  Embedder embedder(file_, Pooling::kLast);
  ThreadPool pool(1);
  auto cancelled = std::make_shared<CancelFlag>(false);
  int answers = 0;
  auto job = embedder.job({std::vector<int32_t>(1000, 9)}, 100, cancelled,
                          [&](std::vector<std::vector<float>>, std::exception_ptr) { ++answers; });
  EXPECT_FALSE(job->run_slice(pool));
  EXPECT_FALSE(job->run_slice(pool));
  cancelled->store(true);
  EXPECT_TRUE(job->run_slice(pool));  // over, without a third pass
  EXPECT_EQ(job->passes(), 2);
  EXPECT_EQ(answers, 0);
  job->abandon("the server is shutting down");  // a cancelled job says nothing either
  EXPECT_EQ(answers, 0);
}

TEST_F(EmbeddingsTest, AbandonedJobAnswersUnavailable) {
  Embedder embedder(file_, Pooling::kLast);
  std::exception_ptr failure;
  auto job =
      embedder.job({{1, 2, 3}}, 64, std::make_shared<CancelFlag>(false),
                   [&](std::vector<std::vector<float>>, std::exception_ptr e) { failure = e; });
  job->abandon("the server is shutting down");
  ASSERT_TRUE(failure);
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
}

TEST_F(EmbeddingsTest, EngineDropsACancelledJobAndServesOn) {
  Model model(file_);
  EngineOptions options;
  options.threads = 1;
  options.kv_memory = "16MiB";
  options.max_batch_tokens = 64;
  Engine engine(model, *tokenizer_, options);
  Embedder embedder(file_, Pooling::kLast);
  auto cancelled = std::make_shared<CancelFlag>(false);
  std::atomic<int> answers{0};
  // 300 inputs of 2000 tokens: 9,375 passes of 64, far more than the test waits for.
  std::vector<std::vector<int32_t>> inputs(300, std::vector<int32_t>(2000, 9));
  engine.run_between_steps(
      embedder.job(inputs, options.max_batch_tokens, cancelled,
                   [&](std::vector<std::vector<float>>, std::exception_ptr) { ++answers; }));
  const auto wait_for_tasks = [&](int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (engine.stats().background_tasks != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return engine.stats().background_tasks;
  };
  EXPECT_EQ(wait_for_tasks(1), 1);
  cancelled->store(true);
  EXPECT_EQ(wait_for_tasks(0), 0) << "the cancelled job still runs";
  EXPECT_EQ(answers.load(), 0);

  auto queue = std::make_shared<EventQueue>();
  Request request;
  request.prompt = tokenizer_->encode("hello", true);
  request.sampling.max_tokens = 4;
  request.sampling.ignore_eos = true;
  request.sink = queue;
  engine.submit(std::move(request));
  TokenEvent event;
  while (queue->pop(event, std::chrono::seconds(30)) && !event.finished) {
  }
  EXPECT_EQ(event.completion_tokens, 4);
}

}  // namespace
}  // namespace rapide::serve
