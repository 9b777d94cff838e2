// What a streamed generation puts on the wire: a GenerationJob driven by the demo model's
// engine, answering on a recording HttpExchange. The Sse tests check the encoder; these check
// the exact bytes a stream ends with. Issue 53's mutation audit: dropping `data: [DONE]` from
// the generation path, or writing it with one newline, passed every unit test.
//
// Lifetimes (why an earlier version was removed): the engine thread holds each request's
// StrandSink, which holds an executor of the io_context, until the engine lets go of the
// request. Here each test owns its io_context and its engine, declared in that order, and
// tears down in reverse: the engine is destroyed first (its thread joined, every sink
// released), then the handlers the sinks posted are run, and only then does the io_context
// go. A shared engine with an io_context per answer let the engine thread touch a destroyed
// io_context (heap-use-after-free under ASan).
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "api/chat.h"
#include "api/openai_protocol.h"
#include "engine/engine.h"
#include "serve/demo_model.h"
#include "serve/generation.h"
#include "serve/metrics.h"

namespace rapide::serve {
namespace {

using nlohmann::json;

// What the job wrote.
struct Recorded {
  int status = 0;
  std::string content_type;
  std::string body;
  bool streaming = false;
  bool ended = false;
  bool done = false;
};

// Records a response on its own strand; `done` once the response is complete.
class RecordingExchange final : public HttpExchange {
 public:
  explicit RecordingExchange(boost::asio::io_context& io) : strand_(boost::asio::make_strand(io)) {}

  boost::asio::any_io_executor executor() override { return strand_; }
  std::string peer() const override { return "127.0.0.1:1"; }
  void add_header(std::string, std::string) override {}
  void respond(int status, const std::string&, std::string body, const HeaderList&) override {
    r.status = status;
    r.body = std::move(body);
    complete();
  }
  void start_stream(const std::string& content_type) override {
    r.status = 200;
    r.content_type = content_type;
    r.streaming = true;
  }
  void stream(std::string data) override {
    EXPECT_TRUE(r.streaming) << "stream() before start_stream()";
    EXPECT_FALSE(r.ended) << "stream() after end_stream(): " << data;
    r.body += data;
  }
  void end_stream() override {
    EXPECT_FALSE(r.ended) << "end_stream() twice";
    r.ended = true;
    complete();
  }
  // Held until the response completes, as the real exchange does: it keeps the job alive.
  void on_client_gone(std::function<void()> callback) override {
    client_gone_ = std::move(callback);
  }

  Recorded r;

 private:
  void complete() {
    r.done = true;
    client_gone_ = nullptr;
  }

  std::function<void()> client_gone_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
};

class GenerationStreamTest : public ::testing::Test {
 protected:
  GenerationStreamTest()
      : file_(std::make_shared<const ModelFile>(make_demo_model())),
        tokenizer_(Tokenizer::create(file_->tokenizer)),
        model_(file_),
        chat_(*tokenizer_) {
    EngineOptions options;
    options.threads = 1;
    options.kv_memory = "16MiB";
    engine_ = std::make_unique<Engine>(model_, *tokenizer_, options);
  }

  ~GenerationStreamTest() override {
    engine_.reset();  // joins the engine thread: no sink is left to post
    io_.restart();
    io_.poll();  // what the sinks posted before they went, run while the io_context lives
  }

  // What the job wrote for `spec` (all of it, or what it had after 60 s).
  Recorded answer(api::GenerationSpec spec) {
    io_.restart();  // an earlier answer() ran it out of work
    auto exchange = std::make_shared<RecordingExchange>(io_);
    boost::asio::post(exchange->executor(), [&, exchange] {
      GenerationContext context;
      context.engine = engine_.get();
      context.metrics = &metrics_;
      context.model_id = kDemoModelId;
      GenerationJob::start(context, std::move(spec), exchange);
    });
    auto guard = boost::asio::make_work_guard(io_);
    // The demo model answers in milliseconds; 60 s only bounds a stuck engine.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!exchange->r.done && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(exchange->r.done) << "no complete response within 60 s";
    guard.reset();
    io_.restart();
    io_.poll();  // the job's last handlers
    return exchange->r;
  }

  boost::asio::io_context io_;  // first: outlives the engine and every exchange
  ServeMetrics metrics_;        // outlives every job
  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Model model_;
  api::ChatPrompter chat_;
  std::unique_ptr<Engine> engine_;
};

constexpr std::string_view kDone = "data: [DONE]\n\n";

// The body ends with exactly "data: [DONE]\n\n", after the last event's blank line, and no
// other event is the terminator.
void expect_terminated(const Recorded& e) {
  ASSERT_EQ(e.status, 200) << e.body;
  EXPECT_EQ(e.content_type.rfind("text/event-stream", 0), 0u) << e.content_type;
  EXPECT_TRUE(e.ended);
  ASSERT_GT(e.body.size(), kDone.size()) << e.body;
  EXPECT_EQ(e.body.substr(e.body.size() - kDone.size()), kDone) << e.body;
  EXPECT_EQ(e.body.find("[DONE]"), e.body.size() - kDone.size() + 6) << e.body;
  // What comes before it is whole events ("data: {...}\n\n"), so [DONE] is an event of its own.
  const std::string before = e.body.substr(0, e.body.size() - kDone.size());
  EXPECT_EQ(before.rfind("data: {", 0), 0u) << e.body;
  EXPECT_EQ(before.substr(before.size() - 3), "}\n\n") << e.body;
}

TEST_F(GenerationStreamTest, StreamedCompletionEndsWithDone) {
  for (const bool usage : {false, true}) {
    SCOPED_TRACE(usage ? "with include_usage" : "without usage");
    json body = {{"prompt", "hello"}, {"max_tokens", 4}, {"stream", true}, {"n", 2}};
    if (usage) body["stream_options"] = {{"include_usage", true}};
    const Recorded e = answer(api::parse_completion_request(body, *tokenizer_));
    expect_terminated(e);
    if (usage) {
      EXPECT_NE(e.body.find("\"usage\":{"), std::string::npos) << e.body;
    }
  }
}

TEST_F(GenerationStreamTest, StreamedChatCompletionEndsWithDone) {
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                     {"max_tokens", 4},
                     {"stream", true}};
  api::GenerationSpec spec = api::parse_chat_request(body, *tokenizer_);
  chat_.fill_prompt(spec);
  const Recorded e = answer(std::move(spec));
  expect_terminated(e);
  EXPECT_NE(e.body.find("chat.completion.chunk"), std::string::npos) << e.body;
}

// A non-streamed answer carries no terminator (it is one JSON body).
TEST_F(GenerationStreamTest, WholeResponseHasNoTerminator) {
  const Recorded e =
      answer(api::parse_completion_request({{"prompt", "hello"}, {"max_tokens", 4}}, *tokenizer_));
  EXPECT_EQ(e.status, 200);
  EXPECT_FALSE(e.streaming);
  EXPECT_EQ(e.body.find("[DONE]"), std::string::npos) << e.body;
  EXPECT_EQ(json::parse(e.body)["object"], "text_completion");
}

}  // namespace
}  // namespace rapide::serve
