// run_batch on stories260K in process: bad lines go to the errors file without stopping the
// run, duplicate custom_ids stop it before anything runs, a resumed run redoes exactly the
// missing requests with the same results and never one an earlier run answered (matched by
// custom_id, wherever its line moved), what a run reported survives a power cut, and a
// batch record holds what the engine generates for the same request and seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "batch/batch_runner.h"
#include "batch/batch_seed.h"
#include "batch/fnv1a.h"
#include "batch/prefix_order.h"
#include "golden/greedy_runner.h"
#include "power_cut_files.h"
#include "test_paths.h"

namespace rapide::batch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

std::string completion_line(const std::string& id, const std::string& prompt, int max_tokens,
                            json extra = json::object()) {
  json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0.8}};
  body.update(extra);
  return json{{"custom_id", id}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", body}}
      .dump();
}

class BatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    loaded_ = testing::load_for_test(testing::shared_path("models/stories260K/stories260K.gguf"));
    dir_ = fs::temp_directory_path() /
           ("rapide-batch-runner-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  EngineOptions engine_options() const {
    EngineOptions o;
    o.threads = 2;
    o.kv_memory = "64MiB";
    o.max_context = 256;
    o.max_seqs = 16;
    o.max_batch_tokens = 1024;
    return o;
  }
  BatchOptions batch_options() const {
    BatchOptions b;
    b.input = path("in.jsonl");
    b.output = path("out.jsonl");
    b.errors = path("err.jsonl");
    b.model_id = "stories260K";
    b.window = 7;  // several windows, so refills and ordering across them are exercised
    b.progress = ProgressMode::kOff;
    return b;
  }
  BatchSummary run(const BatchOptions& b) {
    Engine engine(*loaded_.model, *loaded_.tokenizer, engine_options());
    return run_batch(engine, b);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_input(const std::vector<std::string>& lines) {
    std::ofstream out(path("in.jsonl"));
    for (const std::string& l : lines) out << l << "\n";
  }

  testing::LoadedForTest loaded_;
  fs::path dir_;
};

std::vector<std::string> good_lines(int count) {
  const char* prompts[] = {"Once upon a time", "Once upon a time there was", "Lily and Tom",
                           "The little dog"};
  std::vector<std::string> lines;
  for (int i = 0; i < count; ++i) {
    json extra = json::object();
    if (i % 3 == 0) extra["seed"] = 100 + i;
    if (i % 5 == 0) extra["n"] = 2;
    if (i % 7 == 0) extra["logprobs"] = 2;
    lines.push_back(completion_line("req-" + std::to_string(i), prompts[i % 4], 8 + i % 13, extra));
  }
  return lines;
}

TEST_F(BatchRunnerTest, BadLinesAreReportedAndTheRestRuns) {
  std::vector<std::string> lines = good_lines(6);
  lines.push_back("{not json");                                                              // 7
  lines.push_back(R"({"method":"POST","url":"/v1/completions","body":{}})");                 // 8
  lines.push_back("[]");                                                                     // 9
  lines.push_back(R"({"custom_id":"u","method":"POST","url":"/v1/embeddings","body":{}})");  // 10
  lines.push_back(R"({"custom_id":"m","method":"GET","url":"/v1/completions","body":{}})");  // 11
  lines.push_back(completion_line("t", "hi", 4, {{"temperature", -1}}));                     // 12
  json too_long = json::array();
  for (int i = 0; i < 300; ++i) too_long.push_back(1 + i % 100);
  lines.push_back(completion_line("long", "", 4, {{"prompt", too_long}}));   // 13
  lines.push_back(completion_line("model", "hi", 4, {{"model", "gpt-4"}}));  // 14
  lines.push_back(
      json{{"custom_id", "chat"},
           {"method", "POST"},
           {"url", "/v1/chat/completions"},
           {"body", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 6}}}}
          .dump());  // 15
  write_input(lines);
  const BatchSummary s = run(batch_options());
  EXPECT_EQ(s.total_lines, 15u);
  EXPECT_EQ(s.succeeded, 7u);
  EXPECT_EQ(s.failed, 8u);

  std::map<uint64_t, json> errors;
  for (const json& e : read_jsonl(path("err.jsonl"))) errors[e["line"].get<uint64_t>()] = e;
  ASSERT_EQ(errors.size(), 8u);
  EXPECT_EQ(errors[7]["error"]["code"], "invalid_json");
  EXPECT_TRUE(errors[7]["custom_id"].is_null());
  EXPECT_EQ(errors[8]["error"]["code"], "invalid_custom_id");
  EXPECT_EQ(errors[9]["error"]["code"], "invalid_request");
  EXPECT_EQ(errors[10]["error"]["code"], "invalid_url");
  EXPECT_EQ(errors[11]["error"]["code"], "invalid_method");
  EXPECT_EQ(errors[12]["response"]["status_code"], 400);
  EXPECT_EQ(errors[12]["error"]["param"], "temperature");
  EXPECT_EQ(errors[13]["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(errors[14]["response"]["status_code"], 404);
  EXPECT_EQ(errors[14]["error"]["code"], "model_not_found");
  EXPECT_EQ(errors[9]["id"], record_id(9, fnv1a64("[]")));

  std::map<std::string, json> outputs;
  for (const json& o : read_jsonl(path("out.jsonl"))) outputs[o["custom_id"]] = o;
  ASSERT_EQ(outputs.size(), 7u);
  const json& r0 = outputs["req-0"];
  EXPECT_EQ(r0["id"], record_id(1, fnv1a64(good_lines(1)[0])));
  EXPECT_TRUE(r0["error"].is_null());
  EXPECT_EQ(r0["response"]["status_code"], 200);
  const json& body = r0["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "stories260K");
  EXPECT_EQ(body["choices"].size(), 2u);                           // n = 2
  EXPECT_TRUE(body["choices"][0]["logprobs"].contains("tokens"));  // logprobs: 2
  EXPECT_GT(body["usage"]["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(outputs["chat"]["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(outputs["chat"]["response"]["body"]["choices"][0]["message"]["role"], "assistant");
}

TEST_F(BatchRunnerTest, ResumeRedoesOnlyMissingLinesWithTheSameResults) {
  write_input(good_lines(24));
  run(batch_options());
  std::map<std::string, json> reference;
  for (const json& o : read_jsonl(path("out.jsonl"))) reference[o["custom_id"]] = o;
  ASSERT_EQ(reference.size(), 24u);

  // Keep 10 records and half of the 11th, as a kill mid-write would.
  std::ifstream in(path("out.jsonl"));
  std::string kept, line;
  for (int i = 0; i < 10 && std::getline(in, line); ++i) kept += line + "\n";
  std::getline(in, line);
  kept += line.substr(0, line.size() / 2);
  in.close();
  std::ofstream(path("out.jsonl"), std::ios::trunc) << kept;

  const BatchSummary s = run(batch_options());
  EXPECT_EQ(s.resumed, 10u);
  EXPECT_EQ(s.succeeded, 14u);
  EXPECT_GT(s.truncated_bytes, 0u);
  std::map<std::string, int> seen;
  for (const json& o : read_jsonl(path("out.jsonl"))) {
    const std::string id = o["custom_id"];
    ++seen[id];
    // Unseeded requests get derive_seed(custom_id), so a redone line samples the same.
    EXPECT_EQ(o["response"]["body"]["choices"], reference[id]["response"]["body"]["choices"]) << id;
  }
  EXPECT_EQ(seen.size(), 24u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;

  // A third run finds nothing to do.
  const BatchSummary again = run(batch_options());
  EXPECT_EQ(again.resumed, 24u);
  EXPECT_EQ(again.succeeded + again.failed, 0u);
}

// Issue 18 item 5: duplicate custom_ids were line errors found mid-run (the first line ran);
// now nothing runs and no file is created.
TEST_F(BatchRunnerTest, DuplicateCustomIdsStopTheBatchBeforeAnythingRuns) {
  std::vector<std::string> lines = good_lines(4);
  lines.push_back(completion_line("req-1", "Lily and Tom", 8));  // 5: req-1 is line 2's
  write_input(lines);
  try {
    run(batch_options());
    ADD_FAILURE() << "a batch with a duplicate custom_id ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("custom_id 'req-1' appears on lines 2 and 5"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("out.jsonl")));
  EXPECT_FALSE(fs::exists(path("err.jsonl")));
}

// Run part of a job, stop, edit the input (lines inserted before and between the answered
// ones, which move), resume: requests are matched by custom_id, so the answered ones are
// neither run again nor answered twice, and only the new ones run.
TEST_F(BatchRunnerTest, ResumeMatchesAnsweredRequestsByCustomIdWhereverTheyMoved) {
  std::vector<std::string> lines = good_lines(6);
  write_input({lines.begin(), lines.begin() + 3});  // the first run sees 3 lines
  const BatchSummary first = run(batch_options());
  ASSERT_EQ(first.succeeded, 3u);
  std::ifstream first_file(path("out.jsonl"));
  const std::string first_records((std::istreambuf_iterator<char>(first_file)),
                                  std::istreambuf_iterator<char>());
  first_file.close();

  // Before the fix resume went by line number: req-0..2 moved to lines 2, 4 and 6 would
  // have run again while the new lines 1, 3 and 5 were taken for answered.
  write_input({lines[3], lines[0], lines[4], lines[1], lines[5], lines[2], "{not json"});
  const BatchSummary s = run(batch_options());
  EXPECT_EQ(s.resumed, 3u);
  EXPECT_EQ(s.succeeded, 3u);  // req-3, req-4, req-5
  EXPECT_EQ(s.failed, 1u);     // line 7
  std::ifstream out_file(path("out.jsonl"));
  const std::string records((std::istreambuf_iterator<char>(out_file)),
                            std::istreambuf_iterator<char>());
  EXPECT_TRUE(records.starts_with(first_records)) << "the first run's records were rewritten";
  std::map<std::string, int> seen;
  for (const json& o : read_jsonl(path("out.jsonl"))) ++seen[o["custom_id"]];
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id << " answered more than once";
  const std::vector<json> errors = read_jsonl(path("err.jsonl"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["id"], record_id(7, fnv1a64("{not json")));

  // An answered request edited since: refused before anything runs, the files unchanged.
  const std::string before = records + "";
  write_input({lines[3], lines[0], lines[4], completion_line("req-1", "changed", 8), lines[5],
               lines[2], "{not json"});
  EXPECT_THROW(run(batch_options()), Error);
  std::ifstream after_file(path("out.jsonl"));
  EXPECT_EQ(
      std::string((std::istreambuf_iterator<char>(after_file)), std::istreambuf_iterator<char>()),
      before);
}

// run_batch returning is the acknowledgement: every line its summary counts must be on disk
// then, not just in the page cache a SIGKILL keeps. Only the end-of-run checkpoint syncs
// here, and a power cut right after the run must leave nothing for a re-run to do.
TEST_F(BatchRunnerTest, WhatARunReportedSurvivesAPowerCut) {
  std::vector<std::string> lines = good_lines(10);
  lines.push_back("{not json");
  write_input(lines);
  PowerCutFiles files;
  BatchOptions b = batch_options();
  b.files = &files;
  b.sync = {.every_records = 1000, .every_seconds = 1e9};
  const BatchSummary s = run(b);
  ASSERT_EQ(s.succeeded, 10u);
  ASSERT_EQ(s.failed, 1u);
  files.power_cut();
  EXPECT_EQ(read_jsonl(path("out.jsonl")).size(), 10u);
  EXPECT_EQ(read_jsonl(path("err.jsonl")).size(), 1u);
  const BatchSummary again = run(batch_options());
  EXPECT_EQ(again.resumed, 11u);
  EXPECT_EQ(again.succeeded + again.failed, 0u);
}

// A power cut in the middle of a run: the records of the checkpoints before it survive, the
// rest (a partly flushed torn one included) is lost, and the resumed run redoes exactly
// those lines with the same results.
TEST_F(BatchRunnerTest, APowerCutMidRunLosesOnlyUnsyncedRecords) {
  write_input(good_lines(16));
  run(batch_options());
  std::map<std::string, json> reference;
  for (const json& o : read_jsonl(path("out.jsonl"))) reference[o["custom_id"]] = o;
  ASSERT_EQ(reference.size(), 16u);
  fs::remove(path("out.jsonl"));
  fs::remove(path("err.jsonl"));

  PowerCutFiles files;
  files.fail_after_writes(10);  // the machine dies after the 10th record's write
  BatchOptions b = batch_options();
  b.files = &files;
  b.sync = {.every_records = 4, .every_seconds = 1e9};
  EXPECT_THROW(run(b), Error);
  files.power_cut(/*keep_unsynced=*/20);  // part of the 9th record reached the disk
  const BatchSummary s = run(batch_options());
  EXPECT_EQ(s.resumed, 8u);  // the checkpoints after records 4 and 8
  EXPECT_GT(s.truncated_bytes, 0u);
  EXPECT_EQ(s.succeeded, 8u);
  std::map<std::string, int> seen;
  for (const json& o : read_jsonl(path("out.jsonl"))) {
    const std::string id = o["custom_id"];
    ++seen[id];
    EXPECT_EQ(o["response"]["body"]["choices"], reference[id]["response"]["body"]["choices"]) << id;
  }
  EXPECT_EQ(seen.size(), 16u);
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
}

TEST_F(BatchRunnerTest, RecordsHoldWhatTheEngineGeneratesForTheSameSeed) {
  write_input({completion_line("a", "Once upon a time", 24),
               completion_line("b", "Lily and Tom", 24, {{"seed", 7}})});
  run(batch_options());
  std::map<std::string, std::string> text;
  for (const json& o : read_jsonl(path("out.jsonl"))) {
    text[o["custom_id"]] = o["response"]["body"]["choices"][0]["text"];
  }
  Engine engine(*loaded_.model, *loaded_.tokenizer, engine_options());
  const std::pair<std::string, uint64_t> cases[] = {{"a", derive_seed("a")}, {"b", 7}};
  for (const auto& [id, seed] : cases) {
    auto queue = std::make_shared<EventQueue>();
    Request r;
    r.prompt = loaded_.tokenizer->encode(id == "a" ? "Once upon a time" : "Lily and Tom", true);
    r.sampling.temperature = 0.8f;
    r.sampling.max_tokens = 24;
    r.sampling.seed = seed;
    r.sink = queue;
    engine.submit(std::move(r));
    std::string generated;
    TokenEvent e;
    while (queue->pop(e, std::chrono::seconds(60))) {
      generated += e.text;
      if (e.finished) break;
    }
    EXPECT_EQ(text[id], generated) << id;
  }
}

TEST(PrefixOrder, GroupsSharedPrefixesAndKeepsInputOrderOnTies) {
  auto request = [](uint64_t line, std::vector<int32_t> prompt) {
    BatchRequest r;
    r.line = line;
    r.spec.prompts = {std::move(prompt)};
    return r;
  };
  std::vector<BatchRequest> window = {request(1, {1, 5, 9}), request(2, {1, 2}),
                                      request(3, {1, 5, 9}), request(4, {1, 2, 3})};
  order_window(window, BatchOrder::kInput);
  EXPECT_EQ(window[0].line, 1u);
  order_window(window, BatchOrder::kPrefix);
  std::vector<uint64_t> lines;
  for (const BatchRequest& r : window) lines.push_back(r.line);
  EXPECT_EQ(lines, (std::vector<uint64_t>{2, 4, 1, 3}));
}

TEST(BatchPaths, ErrorsFileDefaultsNextToTheOutput) {
  EXPECT_EQ(default_errors_path("out/results.jsonl"), "out/results.errors.jsonl");
  EXPECT_EQ(default_errors_path("results"), "results.errors.jsonl");
}

}  // namespace
}  // namespace rapide::batch
