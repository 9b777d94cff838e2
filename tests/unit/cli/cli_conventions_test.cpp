// One flag vocabulary across subcommands (issue 20), through the real binary: --version's
// identity lines, "did you mean" and exit code 2 for usage errors, the llama.cpp / vLLM
// aliases, flags from RAPIDE_<FLAG> and from --config, and --kv-memory beyond the machine.
// The effective context is read from the engine's start-up line ("context N").
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::string model() {
  return shared_path("models/stories260K/stories260K.gguf");
}

// A quick greedy run with extra flags and environment variables ("NAME=VALUE").
CliResult quick_run(const std::string& flags, const std::string& env = "") {
  return run_rapide("run -m " + model() + " -p 'Once upon a time' -n 2 --temp 0 " + flags, true,
                    env);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CliConventions, VersionNamesReleaseCommitBuildAndKernels) {
  const CliResult r = run_rapide("--version");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("rapide 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncommit "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nbuild "), std::string::npos) << r.out;
  // The ISA line names one of the kernel families rapide has.
  EXPECT_TRUE(r.out.find("\nkernels scalar") != std::string::npos ||
              r.out.find("\nkernels avx2") != std::string::npos ||
              r.out.find("\nkernels avx512") != std::string::npos)
      << r.out;
}

TEST(CliConventions, UsageErrorsAreOneLineWithASuggestionAndExitTwo) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  struct Case {
    std::string args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"run -m " + model() + " -p hi --ctx-siz 64", "did you mean --ctx-size?"},
           {"serve --prot 8080", "did you mean --port?"},
           {"perplexity -m x -f y --ctx-sise 64", "did you mean --ctx-size?"},
           {"run -m " + model() + " -p hi --frobnicate", "unknown flag --frobnicate"},
           {"run -m " + model() + " -p hi --top-k lots", "--top-k"},
           {"run -p hi", "--model is required"},
           {"", "subcommand is required"},
       }) {
    const CliResult r = run_rapide(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("error: "), 0u) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  }
  EXPECT_EQ(run_rapide("run --help").exit_code, 0);
}

TEST(CliConventions, LlamaCppAndVllmSpellingsAreAccepted) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const CliResult r = quick_run("--max-model-len 96 -np 3 -ngl 99");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("context 96"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/ 3 sequences per step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-ngl"), std::string::npos) << "a note says -ngl is ignored: " << r.out;
  // perplexity takes --ctx-size like every other subcommand (and keeps --ctx).
  const CliResult help = run_rapide("perplexity --help");
  EXPECT_NE(help.out.find("--ctx-size"), std::string::npos) << help.out;
  const CliResult bench = run_rapide("bench --help");
  for (const char* flag : {"--served-model-name", "--num-prompts", "--request-rate"}) {
    EXPECT_NE(bench.out.find(flag), std::string::npos) << flag;
  }
}

// Issue 51: llama.cpp's spellings misfired. -hf was read as "-h -f" (help, exit 0); -fa as
// "-f a" ("give exactly one of -p/--prompt and -f/--file"); --n-predict, --jinja, --mlock
// and vLLM's --max-num-seqs were unknown flags.
TEST(CliConventions, DownloadFlagsAreRefusedByName) {
  for (const std::string& args :
       {std::string("run -hf org/model -p hi"), std::string("serve --hf-repo org/model"),
        std::string("run -m x.gguf -p hi -hff model-q4_0.gguf"),
        std::string("chat --hf-file=model.gguf")}) {
    const CliResult r = run_rapide(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("error: -"), 0u) << r.out;
    EXPECT_NE(r.out.find("rapide makes no downloads: give a local file with --model PATH"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  }
}

TEST(CliConventions, LlamaCppGenerationFlagsWork) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  // -fa with no value, with one, and the long spelling; rapide's attention is always fused.
  for (const std::string& flags : {std::string("-fa"), std::string("-fa on"),
                                   std::string("--flash-attn off"), std::string("-fa=auto")}) {
    const CliResult r = quick_run(flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.out;
  }
  const CliResult bad_fa = quick_run("-fa maybe");
  EXPECT_EQ(bad_fa.exit_code, 2) << bad_fa.out;
  EXPECT_NE(bad_fa.out.find("--flash-attn"), std::string::npos) << bad_fa.out;
  EXPECT_NE(run_rapide("run --help").out.find("fused"), std::string::npos);

  // --n-predict is -n; -1 generates until the context's end.
  const auto run_without_n = [](const std::string& flags) {
    return run_rapide("run -m " + model() + " -p 'Once upon a time' --temp 0 " + flags);
  };
  const CliResult three = run_without_n("--n-predict 3 --ignore-eos");
  ASSERT_EQ(three.exit_code, 0) << three.out;
  EXPECT_NE(three.out.find("generated: 3 (length)"), std::string::npos) << three.out;
  const CliResult unlimited = run_without_n("-n -1 --ignore-eos --ctx-size 24");
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.out;
  int prompt = 0, generated = 0;
  ASSERT_EQ(std::sscanf(unlimited.out.substr(unlimited.out.find("prompt tokens:")).c_str(),
                        "prompt tokens: %d", &prompt),
            1)
      << unlimited.out;
  ASSERT_EQ(std::sscanf(unlimited.out.substr(unlimited.out.find("generated:")).c_str(),
                        "generated: %d", &generated),
            1)
      << unlimited.out;
  EXPECT_EQ(prompt + generated, 24) << unlimited.out;

  // vLLM's --max-num-seqs is --max-seqs.
  const CliResult seqs = quick_run("--max-num-seqs 3");
  ASSERT_EQ(seqs.exit_code, 0) << seqs.out;
  EXPECT_NE(seqs.out.find("/ 3 sequences per step"), std::string::npos) << seqs.out;
  // --jinja where chat templates apply; bench's output length is -n / --n-predict too.
  for (const char* command : {"serve", "chat", "batch"}) {
    EXPECT_NE(run_rapide(std::string(command) + " --help").out.find("--jinja"), std::string::npos)
        << command;
  }
  EXPECT_NE(run_rapide("bench --help").out.find("--n-predict"), std::string::npos);
}

TEST(CliConventions, MlockLocksTheModelOrNamesTheLimit) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  // Where the process may lock (CAP_IPC_LOCK, or a high enough RLIMIT_MEMLOCK) the model is
  // locked and the amount logged; elsewhere the run fails naming the limit.
  const CliResult locked = quick_run("--mlock");
  if (locked.exit_code == 0) {
    EXPECT_NE(locked.out.find("locked in RAM"), std::string::npos) << locked.out;
    EXPECT_EQ(locked.out.find("--mlock: 0 B locked"), std::string::npos) << locked.out;
  } else {
    EXPECT_EQ(locked.exit_code, 1) << locked.out;
    EXPECT_NE(locked.out.find("RLIMIT_MEMLOCK"), std::string::npos) << locked.out;
  }
  // Without CAP_IPC_LOCK (root drops it with setpriv) and with RLIMIT_MEMLOCK 0, it fails.
  const CliResult refused =
      quick_run("--mlock",
                "X=1 $(test \"$(id -u)\" = 0 && echo setpriv --bounding-set -ipc_lock "
                "--inh-caps -ipc_lock) prlimit --memlock=0:0");
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("RLIMIT_MEMLOCK"), std::string::npos) << refused.out;
}

TEST(CliConventions, AnUnknownSubcommandListsTheSubcommands) {
  const CliResult r = run_rapide("frobnicate -m x");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown subcommand 'frobnicate'"), std::string::npos) << r.out;
  for (const char* name : {"run", "serve", "chat", "bench", "batch", "quantize"}) {
    EXPECT_NE(r.out.find(std::string(" ") + name + ","), std::string::npos) << name << r.out;
  }
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  const CliResult typo = run_rapide("srve");
  EXPECT_EQ(typo.exit_code, 2) << typo.out;
  EXPECT_NE(typo.out.find("did you mean serve?"), std::string::npos) << typo.out;
  const CliResult none = run_rapide("");
  EXPECT_NE(none.out.find("serve"), std::string::npos) << none.out;
}

TEST(CliConventions, FlagsComeFromTheEnvironmentAndAConfigFile) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const CliResult env = quick_run("", "RAPIDE_CTX_SIZE=80");
  ASSERT_EQ(env.exit_code, 0) << env.out;
  EXPECT_NE(env.out.find("context 80"), std::string::npos) << env.out;
  // The command line wins over the environment.
  const CliResult both = quick_run("--ctx-size 112", "RAPIDE_CTX_SIZE=80");
  EXPECT_NE(both.out.find("context 112"), std::string::npos) << both.out;

  const std::string plain = write_temp("rapide-plain.toml", "ctx-size = 48\nmax-seqs = 5\n");
  const CliResult file = quick_run("--config " + plain);
  ASSERT_EQ(file.exit_code, 0) << file.out;
  EXPECT_NE(file.out.find("context 48"), std::string::npos) << file.out;
  EXPECT_NE(file.out.find("/ 5 sequences per step"), std::string::npos) << file.out;
  // A [section] configures that subcommand only.
  const std::string sections =
      write_temp("rapide-sections.toml", "[serve]\nctx-size = 200\n[run]\nctx-size = 64\n");
  const CliResult section = quick_run("--config " + sections);
  EXPECT_NE(section.out.find("context 64"), std::string::npos) << section.out;
  // A misspelt key is an error, not silently ignored.
  const std::string typo = write_temp("rapide-typo.toml", "ctx-sise = 48\n");
  const CliResult bad = quick_run("--config " + typo);
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("ctx-sise"), std::string::npos) << bad.out;
}

// `key=value` lines of a --print-config output (values without quotes or spaces, so a string
// written "8080" compares with the number 8080), and the `# key = (not set)` keys.
struct PrintedConfig {
  std::map<std::string, std::string> values;
  std::set<std::string> unset;
};

std::string bare(std::string v) {
  std::string out;
  for (const char c : v) {
    if (c != '"' && c != ' ') out += c;
  }
  return out;
}

PrintedConfig parse_printed(const std::string& text) {
  PrintedConfig c;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string unset_mark = " = (not set)";
    if (line.starts_with("# ") && line.ends_with(unset_mark)) {
      c.unset.insert(line.substr(2, line.size() - 2 - unset_mark.size()));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq != std::string::npos) c.values[bare(line.substr(0, eq))] = bare(line.substr(eq + 1));
  }
  return c;
}

// Issue 50: `rapide serve --config FILE` takes every serve flag. The key list comes from the
// app itself (--print-config names every option, set or not), so a flag added later without a
// value here fails this test by name. Each value differs from the default; the file is read
// back through --print-config (the flags serve would run with: nothing loads or listens).
TEST(CliConventions, ServeConfigRoundTripsEveryFlag) {
  const CliResult defaults = run_rapide("serve --print-config", false);
  ASSERT_EQ(defaults.exit_code, 0) << defaults.out;
  const PrintedConfig listed = parse_printed(defaults.out);
  // TOML value written -> value printed back (bare), where they differ.
  struct Value {
    std::string toml, printed;
  };
  const std::map<std::string, Value> values = {
      {"model", {"\"/models/m.gguf\"", ""}},
      {"tokenizer", {"\"/models/tokenizer.bin\"", ""}},
      {"threads", {"3", ""}},
      {"act-quant", {"\"off\"", ""}},
      {"tp", {"2", ""}},
      {"pp", {"3", ""}},
      {"pp-micro-batches", {"4", ""}},
      {"memory-limit", {"\"512MiB\"", ""}},
      {"host", {"\"0.0.0.0\"", ""}},
      {"port", {"8123", ""}},
      {"api-key", {"[\"k1\", \"k2\"]", "[k1,k2]"}},
      {"api-key-file", {"\"/etc/keys\"", ""}},
      {"max-body", {"\"2MiB\"", "2097152"}},
      {"drain-timeout", {"12.5", ""}},
      {"http-threads", {"3", ""}},
      {"max-connections", {"77", ""}},
      {"header-timeout", {"9", ""}},
      {"max-pending-bytes", {"\"3MiB\"", "3145728"}},
      {"served-model-name", {"\"my-model\"", ""}},
      {"tool-call-parser", {"\"hermes\"", ""}},
      {"demo-seed", {"42", ""}},
      {"chat-template", {"\"chatml\"", ""}},
      {"allowed-origins",
       {"[\"https://a.example\", \"https://b.example\"]", "[https://a.example,https://b.example]"}},
      {"compressor-model", {"\"/models/small.gguf\"", ""}},
      {"pooling", {"\"mean\"", ""}},
      {"log-format", {"\"json\"", ""}},
      {"log-file", {"\"/var/log/rapide.log\"", ""}},
      {"log-level", {"\"debug\"", ""}},
      {"log-prompts", {"true", ""}},
      {"log-stats-interval", {"7.5", ""}},
      {"disaggregate", {"true", ""}},
      {"role", {"\"decode\"", ""}},
      {"disagg-timeout-ms", {"1234", ""}},
      {"disagg-min-prompt", {"48", ""}},
      {"max-batch-tokens", {"333", ""}},
      {"max-seqs", {"5", ""}},
      {"prefill-chunk", {"96", ""}},
      {"ctx-size", {"1024", ""}},
      {"batching", {"\"static\"", ""}},
      {"kv-layout", {"\"contiguous\"", ""}},
      {"kv-block-size", {"32", ""}},
      {"kv-memory", {"\"64MiB\"", ""}},
      {"kv-type", {"\"q8_0\"", ""}},
      {"prefix-cache", {"\"off\"", ""}},
      {"kv-offload-ram", {"\"256MiB\"", ""}},
      {"kv-offload-dir", {"\"/var/cache/kv\"", ""}},
      {"kv-offload-size", {"\"2GiB\"", ""}},
      {"kv-offload-codec", {"\"zstd\"", ""}},
      {"spec", {"\"draft\"", ""}},
      {"draft-model", {"\"/models/draft.gguf\"", ""}},
      {"spec-tokens", {"\"3\"", ""}},
      {"spec-max-tokens", {"9", ""}},
      {"draft-p-min", {"0.25", ""}},
      {"spec-ngram-min", {"2", ""}},
      {"spec-ngram-max", {"5", ""}},
      {"max-queue", {"99", ""}},
      {"flash-attn", {"\"on\"", ""}},
      {"jinja", {"true", ""}},
      {"mlock", {"true", ""}},
  };
  std::set<std::string> keys;
  for (const auto& [key, value] : listed.values) keys.insert(key);
  keys.insert(listed.unset.begin(), listed.unset.end());
  ASSERT_GT(keys.size(), 40u) << defaults.out;
  for (const std::string& key : keys) {
    EXPECT_TRUE(values.contains(key)) << "serve --" << key << " has no value in this test";
  }
  std::string toml;
  for (const auto& [key, value] : values) {
    EXPECT_TRUE(keys.contains(key)) << key << " is not a serve flag any more";
    // Each value differs from the default, so reading it back proves the file was read.
    EXPECT_NE(bare(value.toml), listed.values.contains(key) ? listed.values.at(key) : "")
        << key << ": pick a value other than the default";
    toml += key + " = " + value.toml + "\n";
  }
  const std::string file = write_temp("rapide-serve-every-flag.toml", toml);
  const CliResult back = run_rapide("serve --config " + file + " --print-config", false);
  ASSERT_EQ(back.exit_code, 0) << back.out;
  const PrintedConfig read = parse_printed(back.out);
  for (const auto& [key, value] : values) {
    const std::string expected = value.printed.empty() ? bare(value.toml) : value.printed;
    ASSERT_TRUE(read.values.contains(key)) << key << " was not read:\n" << back.out;
    EXPECT_EQ(read.values.at(key), expected) << key;
  }
  EXPECT_TRUE(read.unset.empty()) << back.out;

  // The printed file is itself a config file that gives the same flags.
  const std::string again_file = write_temp("rapide-serve-printed.toml", back.out);
  const CliResult again = run_rapide("serve --config " + again_file + " --print-config", false);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(parse_printed(again.out).values, read.values);

  // The command line overrides the file.
  const CliResult over =
      run_rapide("serve --config " + file + " --port 9001 --max-seqs 11 --print-config", false);
  ASSERT_EQ(over.exit_code, 0) << over.out;
  EXPECT_EQ(parse_printed(over.out).values["port"], "9001");
  EXPECT_EQ(parse_printed(over.out).values["max-seqs"], "11");
  EXPECT_EQ(parse_printed(over.out).values["kv-memory"], "64MiB");

  // An unknown key is a usage error naming it; so is a key of another command.
  for (const std::string bad : {"max-seqz = 4\n", "workload = \"random\"\n"}) {
    const std::string typo = write_temp("rapide-serve-typo.toml", "port = 8123\n" + bad);
    const CliResult r = run_rapide("serve --config " + typo + " --print-config");
    EXPECT_EQ(r.exit_code, 2) << bad << r.out;
    EXPECT_NE(r.out.find(bad.substr(0, bad.find(' '))), std::string::npos) << r.out;
  }
}

// Issue 53: `--api-key ""` exited 2, but RAPIDE_API_KEY= (set, empty) started a server with
// authentication off, as did an empty --api-key-file in either form. Every form exits 2 before
// serving. `timeout` bounds the run: before the fix the server came up and kept serving.
TEST(CliConventions, AnEmptyApiKeyInAnyFormExitsTwo) {
  const auto serve = [](const std::string& flags, const std::string& env) {
    return run_rapide("serve --host 127.0.0.1 --port 0 " + flags, true, env + " timeout 20");
  };
  const CliResult flag = serve("--api-key ''", "");
  EXPECT_EQ(flag.exit_code, 2) << flag.out;
  EXPECT_NE(flag.out.find("--api-key is empty"), std::string::npos) << flag.out;
  for (const std::string env : {"RAPIDE_API_KEY=", "RAPIDE_API_KEY_FILE="}) {
    const CliResult r = serve("", env);
    EXPECT_EQ(r.exit_code, 2) << env << ": " << r.out;
    EXPECT_NE(r.out.find(env.substr(0, env.size() - 1) + " is set to \"\""), std::string::npos)
        << r.out;
  }
  const CliResult file = serve("--api-key-file ''", "");
  EXPECT_EQ(file.exit_code, 2) << file.out;
  EXPECT_NE(file.out.find("--api-key-file is empty"), std::string::npos) << file.out;
}

TEST(CliConventions, KvMemoryBeyondTheMachineFailsAtOnce) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const CliResult r = quick_run("--kv-memory 4096TiB");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("this machine can give only"), std::string::npos) << r.out;
}

TEST(CliConventions, BenchFailsWhenEveryRequestFails) {
  // Port 1 on loopback: every connection is refused at once.
  const CliResult r = run_rapide("bench --url http://127.0.0.1:1 --num-prompts 3 -q");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("3 of 3 requests failed"), std::string::npos) << r.out;
  // vLLM's --host / --port name the same server.
  const CliResult parts = run_rapide("bench --host 127.0.0.1 --port 1 --num-prompts 2 -q");
  EXPECT_EQ(parts.exit_code, 1) << parts.out;
  EXPECT_NE(parts.out.find("127.0.0.1:1"), std::string::npos) << parts.out;
}

TEST(CliConventions, BenchDefaultWorkloadsFitTheModelsContext) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  // shared-prefix's defaults (a 1000-token system prompt) exceed a 256-token context: unless
  // they shrink, every request is refused and the run exits 1.
  const CliResult r = run_rapide("bench --engine -m " + model() +
                                 " --ctx-size 256 --workload shared-prefix --num-prompts 2 -q");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("exceed the model's context of 256"), std::string::npos) << r.out;
  // Sizes the user gave are kept, and the error rate then decides.
  const CliResult given = run_rapide("bench --engine -m " + model() +
                                     " --ctx-size 256 --workload shared-prefix --prefix-len 600 "
                                     "--num-prompts 2 -q --max-error-rate 0.5");
  EXPECT_EQ(given.exit_code, 1) << given.out;
  EXPECT_NE(given.out.find("2 of 2 requests failed"), std::string::npos) << given.out;
}

}  // namespace
}  // namespace rapide::testing
