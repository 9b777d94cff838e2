// `rapide bench` end to end: the real binary against the real `rapide serve` on stories260K
// over loopback, and the same workload in-process, both bounded in time and size.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "loadgen/bench_report.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::string model_path() {
  return shared_path("models/stories260K/stories260K.gguf");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A `rapide serve` child on an ephemeral loopback port, stopped with SIGTERM.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& extra_flags) {
    log_ = ::testing::TempDir() + "/bench_e2e_serve_" + std::to_string(::getpid()) + ".log";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string command = "exec " + rapide_binary() + " serve -m " + model_path() +
                                  " -t 1 --host 127.0.0.1 --port 0 " + extra_flags + " > " + log_ +
                                  " 2>&1";
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const std::regex serving(R"(serving .* on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 300 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = read_file(log_);
      if (std::regex_search(text, m, serving)) port_ = std::stoi(m[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServeProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }
  std::string log() const { return read_file(log_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

bool serve_available() {
  return std::system((rapide_binary() + " serve --help > /dev/null 2>&1").c_str()) == 0;
}

int run_bench(const std::string& flags, const std::string& out) {
  const std::string command = "timeout 120 " + rapide_binary() + " bench -q -m " + model_path() +
                              " --seed 3 --output " + out + " " + flags + " > " + out + ".txt 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;  // the exit code, -1 for a signal
}

constexpr const char* kWorkload =
    "--workload shared-prefix --prefix-len 120 --input-len 8-16 --output-len 16-32 "
    "--num-requests 24 --concurrency 4 --slo ttft=5s,tpot=1s";

void expect_complete(const loadgen::BenchReport& report) {
  ASSERT_EQ(report.runs.size(), 1u);
  const loadgen::RunResult& run = report.runs[0];
  EXPECT_EQ(run.summary.requests, 24u);
  EXPECT_EQ(run.summary.completed, 24u);
  for (const loadgen::RequestRecord& r : run.records) {
    EXPECT_TRUE(r.ok()) << r.error_message;
    // Forced lengths: exactly what was asked for, with usage counts.
    EXPECT_EQ(r.output_tokens, r.expected_output_tokens);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_GT(r.prompt_tokens, 120);
    EXPECT_GT(r.ttft(), 0);
    EXPECT_GE(r.e2e(), r.ttft());
  }
  EXPECT_GT(run.summary.output_throughput, 0);
  EXPECT_EQ(run.summary.good, 24u);
}

TEST(BenchEndToEnd, AgainstRapideServeAndInProcess) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  if (!serve_available()) RAPIDE_MISSING_PREREQUISITE("this rapide binary has no serve subcommand");
  const std::string dir = ::testing::TempDir() + "/bench_e2e_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  {
    ServeProcess serve("");
    ASSERT_GT(serve.port(), 0) << serve.log();
    const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());
    ASSERT_EQ(run_bench("--url " + url + " " + kWorkload, dir + "/http.json"), 0)
        << read_file(dir + "/http.json.txt");
    expect_complete(loadgen::read_report_file(dir + "/http.json"));
    // Chat endpoint and a multi-turn conversation through the same server.
    ASSERT_EQ(run_bench("--url " + url +
                            " --api chat --workload multi-turn --turns 3 --input-len 4-8 "
                            "--output-len 8 --num-requests 6 --concurrency 2",
                        dir + "/chat.json"),
              0)
        << read_file(dir + "/chat.json.txt");
    const loadgen::BenchReport chat = loadgen::read_report_file(dir + "/chat.json");
    EXPECT_EQ(chat.runs.at(0).summary.completed, 6u);
    // Each turn resends the history: prompts grow within a conversation.
    EXPECT_GT(chat.runs[0].records[2].prompt_tokens, chat.runs[0].records[0].prompt_tokens);
  }
  ASSERT_EQ(run_bench(std::string("--engine -t 1 ") + kWorkload, dir + "/engine.json"), 0)
      << read_file(dir + "/engine.json.txt");
  expect_complete(loadgen::read_report_file(dir + "/engine.json"));
  const std::string table = read_file(dir + "/engine.json.txt");
  EXPECT_NE(table.find("in-process engine"), std::string::npos) << table;

  const std::string compare = dir + "/compare.txt";
  ASSERT_EQ(std::system((rapide_binary() + " bench compare " + dir + "/http.json " + dir +
                         "/engine.json > " + compare + " 2>&1")
                            .c_str()),
            0);
  EXPECT_NE(read_file(compare).find("TTFT p50"), std::string::npos);
}

TEST(BenchEndToEnd, UnreachableServerStillCompletes) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "/bench_e2e_refused_" + std::to_string(::getpid()) + ".json";
  // Port 9 (discard) on loopback: nothing listens there in a test environment. The run
  // completes and writes its report, then exits 1: every request failed (issue 20).
  ASSERT_EQ(
      run_bench("--url http://127.0.0.1:9 --num-requests 3 --input-len 4 --output-len 4", out), 1)
      << read_file(out + ".txt");
  const loadgen::BenchReport report = loadgen::read_report_file(out);
  EXPECT_EQ(report.runs.at(0).summary.failed, 3u);
  EXPECT_EQ(report.runs[0].summary.failures.at("connect"), 3u);
  EXPECT_NE(read_file(out + ".txt").find("connect"), std::string::npos);
}

}  // namespace
}  // namespace rapide::testing
