#include "jinja_oracle.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "base/error.h"

namespace rapide::testing {
namespace {

std::string run_command(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *status = -1;
    return out;
  }
  char buf[65536];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

nlohmann::ordered_json oracle_case(const std::string& source, const ChatTemplateInputs& inputs) {
  nlohmann::ordered_json c;
  c["template"] = source;
  c["messages"] = inputs.messages;
  c["tools"] = inputs.tools;
  c["add_generation_prompt"] = inputs.add_generation_prompt;
  c["bos_token"] = inputs.bos_token;
  c["eos_token"] = inputs.eos_token;
  c["extra_context"] = inputs.extra_context;
  return c;
}

std::vector<OracleResult> run_oracle(const nlohmann::ordered_json& cases) {
  // ctest runs every test case in its own process; a cache keyed by the cases and the oracle
  // script lets them share one Python run instead of starting Python for each. Templates
  // print today's date (strftime_now), so the day is part of the key: yesterday's results
  // must not stand for today's.
  std::string request = cases.dump();
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char day[16];
  const size_t day_len = std::strftime(day, sizeof day, "%Y-%m-%d", &local);
  std::string key = std::to_string(std::hash<std::string>{}(
      request + read_text(RAPIDE_CHAT_ORACLE) + std::string(day, day_len)));
  // In the build tree, not the temporary directory: that one is each test process's own and
  // goes when it ends (tests/private_temp_dir.cpp), and /tmp is no place to leave files.
  const std::filesystem::path cache_dir = std::filesystem::path(RAPIDE_TEST_CACHE_DIR) / "jinja";
  std::filesystem::create_directories(cache_dir);
  std::filesystem::path cache = cache_dir / ("rapide_jinja_oracle_" + key + ".json");
  std::string out = read_text(cache);
  if (out.empty()) {
    int available = 0;
    run_command("python3 -c 'import jinja2' >/dev/null 2>&1", &available);
    if (available != 0) throw OracleUnavailable("python3 with jinja2 is not installed");
    static std::atomic<int> counter{0};
    std::string unique = std::to_string(getpid()) + "_" + std::to_string(counter++);
    std::filesystem::path input =
        std::filesystem::temp_directory_path() / ("rapide_jinja_cases_" + unique + ".json");
    {
      std::ofstream f(input);
      f << request;
    }
    int status = 0;
    out = run_command(std::string("python3 ") + RAPIDE_CHAT_ORACLE + " " + input.string(), &status);
    std::filesystem::remove(input);
    if (status != 0) fail(ErrorCode::kInternal, "render_oracle.py failed (status {})", status);
    std::filesystem::path partial = cache.string() + "." + unique;
    {
      std::ofstream f(partial, std::ios::binary);
      f << out;
    }
    std::filesystem::rename(partial, cache);  // atomic: concurrent tests never read half a file
  }
  std::vector<OracleResult> results;
  for (const auto& r : nlohmann::json::parse(out)) {
    OracleResult result;
    result.ok = r["ok"].get<bool>();
    if (result.ok) {
      result.output = r["output"].get<std::string>();
    } else {
      result.raised = r["raised"].get<bool>();
      result.type = r["type"].get<std::string>();
      result.message = r["message"].get<std::string>();
    }
    results.push_back(std::move(result));
  }
  return results;
}

OracleResult render_with_rapide(const std::string& source, const ChatTemplateInputs& inputs) {
  OracleResult r;
  try {
    r.output = ChatTemplate(source).render(inputs);
    r.ok = true;
  } catch (const Error& e) {
    r.message = e.what();
  }
  return r;
}

std::string compare_with_oracle(const OracleResult& ours, const OracleResult& oracle) {
  if (oracle.ok) {
    if (!ours.ok) return "jinja2 renders but rapide fails: " + ours.message;
    if (ours.output != oracle.output) {
      size_t i = 0;
      while (i < ours.output.size() && i < oracle.output.size() &&
             ours.output[i] == oracle.output[i])
        ++i;
      return "output differs at byte " + std::to_string(i) + "\n--- jinja2:\n" + oracle.output +
             "\n--- rapide:\n" + ours.output;
    }
    return "";
  }
  if (ours.ok)
    return "jinja2 fails (" + oracle.type + ": " + oracle.message + ") but rapide renders:\n" +
           ours.output;
  if (oracle.raised && ours.message != oracle.message) {
    return "raise_exception message differs: jinja2 '" + oracle.message + "', rapide '" +
           ours.message + "'";
  }
  // Python words its recursion and interpreter errors its own way; failing is what matters.
  if (oracle.type == "RecursionError") return "";
  if (!oracle.raised && ours.message.find(oracle.message) == std::string::npos) {
    return "error differs: jinja2 " + oracle.type + " '" + oracle.message + "', rapide '" +
           ours.message + "'";
  }
  return "";
}

}  // namespace rapide::testing
