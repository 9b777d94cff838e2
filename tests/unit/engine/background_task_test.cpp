// Engine::run_between_steps (engine/background_task.h): a task's slices run on the engine
// thread between the steps of running requests (never several slices in a row while a
// request runs), tasks take turns, a throwing slice or a stopping engine abandons the task,
// and generation is unchanged by the work between its steps.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "engine/engine.h"
#include "engine_outcome.h"
#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

// What the test's tasks saw, shared with them (the engine owns and destroys the tasks).
struct Record {
  std::mutex mutex;
  std::vector<std::string> slices;  // "name@step" in the order they ran
  std::vector<std::string> ends;    // "name: done" / "name: abandoned (reason)"
  std::thread::id thread;
};

class CountingTask final : public BackgroundTask {
 public:
  CountingTask(std::string name, int slices, const std::atomic<uint64_t>& steps, Record& record,
               bool throw_at_end = false)
      : name_(std::move(name)),
        slices_(slices),
        steps_(steps),
        record_(record),
        throw_at_end_(throw_at_end) {}

  bool run_slice(ThreadPool& pool) override {
    EXPECT_GE(pool.size(), 1);
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.thread = std::this_thread::get_id();
    record_.slices.push_back(fmt::format("{}@{}", name_, steps_.load()));
    if (++ran_ < slices_) return false;
    if (throw_at_end_) throw std::runtime_error("slice failed");
    record_.ends.push_back(name_ + ": done");
    return true;
  }
  void abandon(const std::string& reason) override {
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.ends.push_back(fmt::format("{}: abandoned ({})", name_, reason));
  }

 private:
  std::string name_;
  int slices_;
  int ran_ = 0;
  const std::atomic<uint64_t>& steps_;
  Record& record_;
  bool throw_at_end_;
};

class BackgroundTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    loaded_ = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
    options_.threads = 2;
    options_.kv_memory = "16MiB";
    options_.max_context = 256;
  }
  Request greedy(int max_tokens, std::shared_ptr<EventSink> sink) const {
    Request r;
    r.prompt = loaded_.tokenizer->encode("Once upon a time", true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sink = std::move(sink);
    return r;
  }
  static void wait_for_end(Record& record, size_t ends) {
    for (int i = 0; i < 5000; ++i) {
      {
        std::lock_guard<std::mutex> lock(record.mutex);
        if (record.ends.size() >= ends) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "the tasks did not end";
  }
  LoadedForTest loaded_;
  EngineOptions options_;
};

TEST_F(BackgroundTaskTest, SlicesInterleaveWithStepsAndTasksTakeTurns) {
  std::vector<int32_t> alone;
  {
    Engine engine(*loaded_.model, *loaded_.tokenizer, options_);
    auto q = std::make_shared<EventQueue>();
    engine.submit(greedy(200, q));
    alone = collect(*q).tokens;
  }
  Engine engine(*loaded_.model, *loaded_.tokenizer, options_);
  std::atomic<uint64_t> steps{0};
  std::atomic<bool> task_queued{false};
  Record record;
  std::thread::id engine_thread;
  // The request's first step runs once both tasks are queued: every slice then has a step of
  // the request on each side until the request ends.
  engine.set_step_observer([&](const StepPlan&, const StepResult&, const StepStats&) {
    engine_thread = std::this_thread::get_id();
    while (!task_queued.load()) std::this_thread::yield();
    steps.fetch_add(1);
  });
  auto q = std::make_shared<EventQueue>();
  engine.submit(greedy(200, q));
  engine.run_between_steps(std::make_unique<CountingTask>("a", 20, steps, record));
  engine.run_between_steps(std::make_unique<CountingTask>("b", 5, steps, record));
  task_queued.store(true);
  const Outcome out = collect(*q);
  wait_for_end(record, 2);

  EXPECT_EQ(out.tokens, alone) << "the work between steps changed the request's tokens";
  std::lock_guard<std::mutex> lock(record.mutex);
  EXPECT_EQ(record.thread, engine_thread);
  ASSERT_EQ(record.slices.size(), 25u);
  // Turns: a and b alternate while both last, and no two slices share a step while the
  // 200-token request runs (it outlasts the 25 slices).
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(record.slices[i][0], i % 2 == 0 ? 'a' : 'b') << i;
  }
  for (size_t i = 1; i < record.slices.size(); ++i) {
    const auto step = [&](size_t k) { return std::stoul(record.slices[k].substr(2)); };
    EXPECT_EQ(step(i), step(i - 1) + 1) << record.slices[i - 1] << " then " << record.slices[i];
  }
  EXPECT_EQ(record.ends, (std::vector<std::string>{"b: done", "a: done"}));
  EXPECT_EQ(engine.stats().background_tasks, 0);
}

TEST_F(BackgroundTaskTest, RunsWhileIdleAndAThrowingSliceOnlyEndsItsTask) {
  Engine engine(*loaded_.model, *loaded_.tokenizer, options_);
  std::atomic<uint64_t> steps{0};
  Record record;
  engine.run_between_steps(std::make_unique<CountingTask>("bad", 3, steps, record, true));
  engine.run_between_steps(std::make_unique<CountingTask>("good", 4, steps, record));
  wait_for_end(record, 2);
  {
    std::lock_guard<std::mutex> lock(record.mutex);
    EXPECT_EQ(record.ends,
              (std::vector<std::string>{"bad: abandoned (slice failed)", "good: done"}));
    EXPECT_EQ(record.slices.size(), 7u);
  }
  auto q = std::make_shared<EventQueue>();
  engine.submit(greedy(8, q));
  EXPECT_EQ(collect(*q).completion_tokens, 8) << "the engine serves on after a failed task";
}

TEST_F(BackgroundTaskTest, StoppingEngineAbandonsUnfinishedTasksAndRefusesNewOnes) {
  std::atomic<uint64_t> steps{0};
  Record record;
  {
    Engine engine(*loaded_.model, *loaded_.tokenizer, options_);
    std::atomic<bool> release{false};
    std::atomic<int> observed{0};
    // The request's second step waits for the test: the task cannot finish its many slices
    // first, and the engine's counters show the request running (drain must time out).
    engine.set_step_observer([&](const StepPlan&, const StepResult&, const StepStats&) {
      if (observed.fetch_add(1) >= 1) {
        while (!release.load()) std::this_thread::yield();
      }
    });
    auto q = std::make_shared<EventQueue>();
    engine.submit(greedy(200, q));
    engine.run_between_steps(std::make_unique<CountingTask>("long", 1000000, steps, record));
    while (observed.load() < 2) std::this_thread::yield();
    EXPECT_FALSE(engine.drain(std::chrono::milliseconds(1)));  // times out: stops the engine
    release.store(true);
    EXPECT_THROW(
        {
          try {
            engine.run_between_steps(std::make_unique<CountingTask>("late", 1, steps, record));
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
            throw;
          }
        },
        Error);
  }
  std::lock_guard<std::mutex> lock(record.mutex);
  EXPECT_EQ(record.ends,
            (std::vector<std::string>{"long: abandoned (the server is shutting down)"}));
}

}  // namespace
}  // namespace rapide::testing
