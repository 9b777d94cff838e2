// `rapide run` and `rapide perplexity` end to end through the real binary: the figures the
// inference-core issue is judged on, and clear errors (never a crash) for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::string model() {
  return shared_path("models/stories260K/stories260K.gguf");
}

TEST(CliRun, PerplexityMatchesLlamaCpp) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  RAPIDE_REQUIRE_SHARED("reference/text/stories-eval.txt");
  const CliResult r = run_rapide("perplexity -m " + model() + " -f " +
                                 shared_path("reference/text/stories-eval.txt") + " --ctx 128");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t at = r.out.find("PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double ppl = std::atof(r.out.c_str() + at + 6);
  // llama.cpp's llama-perplexity on the same text and context: 5.5591.
  EXPECT_NEAR(ppl, 5.559, 0.01) << r.out;
}

// A q8_0 KV cache may cost at most 0.5 % of perplexity (issue 16) over llama.cpp's f16 figure.
TEST(CliRun, PerplexityWithQ8_0KvStaysWithinHalfAPercent) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  RAPIDE_REQUIRE_SHARED("reference/text/stories-eval.txt");
  const CliResult r =
      run_rapide("perplexity -m " + model() + " -f " +
                 shared_path("reference/text/stories-eval.txt") + " --ctx 128 --kv-type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t at = r.out.find("PPL = ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double ppl = std::atof(r.out.c_str() + at + 6);
  EXPECT_NEAR(ppl, 5.5591, 5.5591 * 0.005) << r.out;
}

TEST(CliRun, GreedyRunPrintsTheReferenceText) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  RAPIDE_REQUIRE_SHARED("reference/greedy/stories260K__Once_upon_a_time.txt");
  const CliResult r =
      run_rapide("run -m " + model() + " -p 'Once upon a time' -n 200 --temp 0 --ignore-eos -t 2",
                 /*keep_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(shared_path("reference/greedy/stories260K__Once_upon_a_time.txt"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string expected = ss.str();
  expected = expected.substr(std::string("<s> ").size());  // BOS text and the prompt's space
  if (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(r.out, expected);
}

TEST(CliRun, ReportsTtftAndTpot) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const CliResult r = run_rapide("run -m " + model() + " -p 'Once upon a time' -n 20 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* field : {"prompt tokens: 5", "TTFT:", "prefill:", "TPOT:", "decode:"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " missing in\n" << r.out;
  }
}

// Issue 51: without --kv-memory, run sizes its KV cache for its one sequence at full context
// (--kv-memory auto) and says so; an explicit size is used as given, with no such line.
TEST(CliRun, KvMemoryAutoHoldsOneFullContextAndIsLogged) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const CliResult r = run_rapide("run -m " + model() + " -p hi -n 2 -t 1 -c 256");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // 256 positions x 640 bytes (5 layers x 4 KV heads x 8 dims x K and V x f16).
  EXPECT_NE(r.out.find("engine: kv memory auto: 160.0 KiB (context 256 x 1 sequence x 640 "
                       "B/token; "),
            std::string::npos)
      << r.out;
  const CliResult given = run_rapide("run -m " + model() + " -p hi -n 2 -t 1 --kv-memory 160KiB");
  ASSERT_EQ(given.exit_code, 0) << given.out;
  EXPECT_EQ(given.out.find("kv memory auto"), std::string::npos) << given.out;
  EXPECT_NE(given.out.find("paged layout, 160.0 KiB), context 2048"), std::string::npos)
      << given.out;
}

struct BadInput {
  std::string args;
  std::string message;
  int exit_code = 2;  // a usage error (a malformed or impossible argument); 1: a failure
};

TEST(CliRun, BadInputGivesAClearErrorAndNoCrash) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  RAPIDE_REQUIRE_SHARED("reference/text/stories-eval.txt");
  std::string long_prompt;
  for (int i = 0; i < 1200; ++i) long_prompt += "hello world ";
  const std::vector<BadInput> cases = {
      {"run -m " + model() + " -p '" + long_prompt + "'", "context holds 2048", 1},
      {"run -m " + model() + " -p hi --top-p 3", "top_p must be in [0, 1]"},
      {"run -m " + model() + " -p hi --temp -1", "temperature"},
      {"run -m " + model() + " -p hi --logit-bias 99999=1", "outside the vocabulary"},
      {"run -m " + model() + " -p hi --logit-bias nonsense", "TOKEN=BIAS"},
      {"run -m " + model() + " -p hi --kv-memory lots", "KV memory budget"},
      {"run -m " + model() + " -p hi --batching sometimes", "continuous"},
      {"run -m " + model() + " -p hi --kv-type q5", "must be f16, f32, q8_0 or q4_0"},
      {"run -m " + model() + " -p hi --kv-type q4_0", "multiple of 16"},
      {"run -m /nonexistent.gguf -p hi", "does not exist", 1},
      {"run -m " + shared_path("reference/text/stories-eval.txt") + " -p hi", "not a model file",
       1},
      {"perplexity -m " + model() + " -f " + shared_path("reference/text/stories-eval.txt") +
           " --ctx 100000",
       "exceeds the model's trained context"},
  };
  for (const BadInput& c : cases) {
    const CliResult r = run_rapide(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.out;  // an error exit, not a signal
    EXPECT_NE(r.out.find("error: "), std::string::npos) << r.out;
    std::string lower = r.out;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string want = c.message;
    for (char& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_NE(lower.find(want), std::string::npos) << "expected '" << c.message << "' in\n"
                                                   << r.out;
  }
}

// Speculation's flags: every wrong combination is one clear line and a non-zero exit, and
// a draft-model run prints the same text as a plain one with its speculation summary.
TEST(CliRun, SpeculationFlags) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const std::string base = "run -m " + model() + " -p 'Once upon a time' -n 40 --temp 0 ";
  struct Case {
    std::string flags, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--spec bogus", "--spec must be 'off', 'ngram' or 'draft'"},
           {"--spec draft", "--spec draft needs --draft-model"},
           {"--spec ngram --draft-model " + model(),
            "--draft-model is used only with --spec draft"},
           {"--spec ngram --spec-tokens many", "--spec-tokens must be auto or a number"}}) {
    const CliResult r = run_rapide(base + c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.flags << ": " << r.out;
  }
  const CliResult plain = run_rapide(base + "--no-print-prompt", /*keep_stderr=*/false);
  const CliResult draft = run_rapide(base + "--no-print-prompt --draft-model " + model());
  ASSERT_EQ(plain.exit_code, 0);
  ASSERT_EQ(draft.exit_code, 0) << draft.out;
  EXPECT_NE(draft.out.find(plain.out), std::string::npos) << draft.out;
  EXPECT_NE(draft.out.find("speculation: "), std::string::npos) << draft.out;

  // `rapide bench --engine` reports what speculation did, per run, in its JSON.
  const std::string json = ::testing::TempDir() + "/spec_bench.json";
  const CliResult bench =
      run_rapide("bench --engine -m " + model() +
                 " --workload random --input-len 20 --output-len 30 --num-requests 4"
                 " --concurrency 2 -q -t 2 --spec ngram --spec-tokens 3 --output " +
                 json);
  ASSERT_EQ(bench.exit_code, 0) << bench.out;
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("speculation, run 1"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("guesses verified"), std::string::npos);
}

}  // namespace
}  // namespace rapide::testing
