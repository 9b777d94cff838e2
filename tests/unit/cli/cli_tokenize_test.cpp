// `rapide tokenize` and `rapide detokenize` through the real binary, on llama.cpp's
// vocabulary-only GGUF files: every conformance vector (.inp/.out) is reproduced from a file,
// ids decode back to the text, and bad input gets a one-line error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch file for one test, removed at the end.
struct TempFile {
  std::string path =
      ::testing::TempDir() + "rapide_tokenize_test_" + std::to_string(::getpid()) + ".txt";
  explicit TempFile(const std::string& contents) {
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

std::vector<std::string> test_strings(const std::string& inp) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> strings;
  size_t start = 0;
  for (size_t pos = inp.find(separator); pos != std::string::npos;
       pos = inp.find(separator, start)) {
    strings.push_back(inp.substr(start, pos - start));
    start = pos + separator.size();
  }
  return strings;
}

// The ids of a line, separated by single spaces.
std::string normalized(const std::string& line) {
  std::istringstream numbers(line);
  std::string out;
  for (std::string id; numbers >> id;) out += (out.empty() ? "" : " ") + id;
  return out;
}

class CliTokenizeVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (const char* suffix : {"", ".inp", ".out"}) {
      RAPIDE_REQUIRE_SHARED("tokenizer-tests/" + GetParam() + suffix);
    }
  }
};

TEST_P(CliTokenizeVectors, ReproducesLlamaCppVectors) {
  const std::string vocab = shared_path("tokenizer-tests/" + GetParam());
  const std::vector<std::string> strings = test_strings(read_all(vocab + ".inp"));
  std::istringstream expected(read_all(vocab + ".out"));
  ASSERT_EQ(strings.size(), 46u);
  for (const std::string& text : strings) {
    std::string line;
    ASSERT_TRUE(std::getline(expected, line));
    const TempFile file(text);
    const CliResult r =
        run_rapide("tokenize -m " + vocab + " --ids --no-bos -f " + file.path, false);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // .out files may pad the ids with spaces; ours are single-space separated.
    EXPECT_EQ(r.out, normalized(line) + "\n") << "text: '" << text << "'";
    // And back: the ids, pasted as printed, decode to the text.
    if (!line.empty()) {
      const CliResult back = run_rapide("detokenize -m " + vocab + " '" + line + "'", false);
      ASSERT_EQ(back.exit_code, 0) << back.out;
      EXPECT_EQ(back.out, text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, CliTokenizeVectors,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const auto& info) {
                           return info.param == "ggml-vocab-gpt-2.gguf" ? std::string("Gpt2")
                                                                        : std::string("LlamaSpm");
                         });

TEST(CliTokenize, OutputFormsBosAndSpecialTokens) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const std::string vocab = shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  // GPT-2: "Hello" is 15496, " world" 995, <|endoftext|> 50256; no BOS is added.
  EXPECT_EQ(run_rapide("tokenize -m " + vocab + " --ids 'Hello world'", false).out, "15496 995\n");
  EXPECT_EQ(run_rapide("tokenize -m " + vocab + " 'Hello world'", false).out,
            "15496\t'Hello'\n995\t' world'\n");
  EXPECT_EQ(run_rapide("tokenize -m " + vocab + " --pieces 'Hello world'", false).out,
            "'Hello'\n' world'\n");
  EXPECT_EQ(run_rapide("tokenize -m " + vocab + " --ids --special 'Hello<|endoftext|>'", false).out,
            "15496 50256\n");
  EXPECT_NE(run_rapide("tokenize -m " + vocab + " --ids 'Hello<|endoftext|>'", false).out,
            "15496 50256\n");
  EXPECT_EQ(run_rapide("detokenize -m " + vocab + " --special 15496,50256", false).out,
            "Hello<|endoftext|>");
  EXPECT_EQ(run_rapide("detokenize -m " + vocab + " 15496 50256", false).out, "Hello");
  EXPECT_EQ(run_rapide("detokenize -m " + vocab + " '[15496, 995]'", false).out, "Hello world");
}

TEST(CliTokenize, SentencePieceBosAndEscapedPieces) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const std::string vocab = shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const CliResult with_bos = run_rapide("tokenize -m " + vocab + " --ids 'Hello'", false);
  const CliResult without = run_rapide("tokenize -m " + vocab + " --ids --no-bos 'Hello'", false);
  EXPECT_EQ(with_bos.out, "1 " + without.out);
  // A newline is a byte token here, shown escaped; BOS shows its text.
  const TempFile file("a\nb");
  const CliResult pieces = run_rapide("tokenize -m " + vocab + " --pieces -f " + file.path, false);
  EXPECT_NE(pieces.out.find("'<s>'\n"), std::string::npos) << pieces.out;
  EXPECT_NE(pieces.out.find("'\\n'\n"), std::string::npos) << pieces.out;
}

TEST(CliTokenize, BadInputGivesAClearError) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const std::string vocab = shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  struct Case {
    std::string args;
    std::string message;
    int exit_code = 2;  // a usage error; 1: a failure (here: a missing file)
  };
  for (const Case& c : std::vector<Case>{
           {"tokenize -m " + vocab, "exactly one of TEXT and -f"},
           {"tokenize -m " + vocab + " --ids --pieces x", "exclude each other"},
           {"tokenize -m /nonexistent/model.gguf x", "/nonexistent/model.gguf", 1},
           {"detokenize -m " + vocab + " 12x", "'12x' is not a list of token ids"},
           {"detokenize -m " + vocab + " 99999999", "outside the vocabulary"},
       }) {
    const CliResult r = run_rapide(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace rapide::testing
