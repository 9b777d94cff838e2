// --lora and --lora-use on `rapide run` and `rapide perplexity`, through the real binary: the
// adapter reaches the computation (scale 0 gives the model alone's figures exactly, the GGUF
// and PEFT forms the same figures), and mistakes get one clear error line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "lora_test_util.h"
#include "run_rapide.h"

namespace rapide::testing {
namespace {

const std::string kText = "reference/text/stories-eval.txt";

class LoraCli : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kBaseModel);
    RAPIDE_REQUIRE_SHARED(kText);
  }
  // The "PPL = ..." line of `rapide perplexity` with `flags`.
  std::string perplexity(const std::string& flags) const {
    const CliResult r = run_rapide("perplexity -m " + shared_path(kBaseModel) + " -f " +
                                   shared_path(kText) + " --ctx 64 -t 2 " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const size_t at = r.out.find("PPL = ");
    if (at == std::string::npos) {
      ADD_FAILURE() << r.out;
      return "";
    }
    return r.out.substr(at, r.out.find('\n', at) - at);
  }
  std::string run(const std::string& flags, int* exit_code = nullptr) const {
    const CliResult r =
        run_rapide("run -m " + shared_path(kBaseModel) +
                       " -p 'Once upon a time' -n 12 --temp 0 --ignore-eos -t 2 " + flags,
                   /*keep_stderr=*/exit_code != nullptr);
    if (exit_code != nullptr) {
      *exit_code = r.exit_code;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.out;
    }
    return r.out;
  }
};

TEST_F(LoraCli, PerplexityRunsTheAdapter) {
  const std::string gguf = lora_path("adapters/lora-a.gguf");
  const std::string base = perplexity("");
  const std::string adapted = perplexity("--lora a=" + gguf);
  EXPECT_NE(adapted, base);
  EXPECT_EQ(perplexity("--lora a=" + gguf + ":0"), base);  // a zero update changes no bit
  EXPECT_EQ(perplexity("--lora " + lora_path("adapters/peft-lora-a")), adapted);
  EXPECT_EQ(perplexity("--lora a=" + gguf + " --lora b=" + lora_path("adapters/lora-b.gguf") +
                       " --lora-use a"),
            adapted);
}

TEST_F(LoraCli, RunGeneratesWithTheAdapter) {
  const std::string gguf = lora_path("adapters/lora-a.gguf");
  const std::string base = run("");
  EXPECT_NE(run("--lora tuned=" + gguf), base);
  EXPECT_EQ(run("--lora tuned=" + gguf + ":0"), base);
}

TEST_F(LoraCli, MistakesAreClearErrors) {
  const std::string a = lora_path("adapters/lora-a.gguf"), b = lora_path("adapters/lora-b.gguf");
  const auto expect_error = [&](const std::string& flags, const std::string& part) {
    int code = 0;
    const std::string out = run(flags, &code);
    EXPECT_NE(code, 0) << flags;
    EXPECT_NE(out.find(part), std::string::npos) << flags << ": " << out;
  };
  expect_error("--lora a=" + a + " --lora b=" + b, "choose the one to run with --lora-use NAME");
  expect_error("--lora a=" + a + " --lora-use c", "--lora-use c: no --lora adapter has that name");
  expect_error("--lora a=" + a + " --lora a=" + b, "two adapters are named 'a'");
  expect_error("--lora 'a b=" + a + "'", "adapter name 'a b'");
  expect_error("--lora a=" + shared_path(kBaseModel), "is not a LoRA adapter");
  expect_error("--lora a=/nonexistent/adapter.gguf", "/nonexistent/adapter.gguf");
}

}  // namespace
}  // namespace rapide::testing
