// The issue-5 benchmark: what prefix caching and the KV offload tier buy, in-process (no
// HTTP), on one model. Three scenarios, each compared within the same run:
//
//   ttft   a long shared system prompt + a short question: TTFT of a cold miss vs a hit
//          (and one near miss, to show the diagnostics);
//   chat   a multi-turn chat replayed with its whole history resent each turn: prompt
//          tokens computed with the cache vs without;
//   cycle  many conversations visited round-robin with KV RAM for only a few: TTFT when
//          evicted prefixes are recomputed vs loaded back from the offload tier.
//
// Prompts are random token ids (the figures depend on lengths, not on text).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/percentile.h"
#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "engine/engine.h"
#include "formats/model_file.h"
#include "kernels/kv_rows.h"
#include "kv/memory_budget.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

struct Result {
  std::vector<int32_t> tokens;
  double ttft = 0;
  int cached = 0;
};

Result run(Engine& engine, const std::vector<int32_t>& prompt, int max_tokens) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.stream_text = false;
  auto queue = std::make_shared<EventQueue>();
  r.sink = queue;
  engine.submit(std::move(r));
  Result out;
  TokenEvent e;
  while (queue->pop(e)) {
    if (e.token >= 0) out.tokens.push_back(e.token);
    if (e.finished) {
      if (!e.error.empty()) fail(ErrorCode::kInternal, "request failed: {}", e.error);
      out.ttft = e.metrics.ttft_seconds;
      out.cached = e.cached_prompt_tokens;
      break;
    }
  }
  return out;
}

class TokenSource {
 public:
  TokenSource(int vocab, uint64_t seed) : rng_(seed), dist_(3, vocab - 1) {}
  std::vector<int32_t> take(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = dist_(rng_);
    return t;
  }

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> dist_;
};

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}


struct Setup {
  Model* model;
  const Tokenizer* tokenizer;
  EngineOptions base;
};

void bench_ttft(const Setup& s, int system_tokens, int question_tokens, int hits) {
  std::printf("\n## ttft: %d-token shared system prompt + %d-token question\n\n", system_tokens,
              question_tokens);
  EngineOptions o = s.base;
  o.max_context = std::max(o.max_context, system_tokens + question_tokens + 16);
  Engine engine(*s.model, *s.tokenizer, o);
  TokenSource src(s.model->config().vocab_size, 1);
  // Pairs, each a cold miss on a fresh system prompt then a hit on it with a new question:
  // the VM's speed drifts between seconds, so each hit is compared with the miss next to it.
  std::vector<double> miss_ttft, hit_ttft, ratios;
  std::vector<int32_t> system;
  int cached = 0;
  for (int i = 0; i < hits; ++i) {
    system = src.take(system_tokens);
    const Result miss = run(engine, concat(system, src.take(question_tokens)), 1);
    const Result hit = run(engine, concat(system, src.take(question_tokens)), 1);
    miss_ttft.push_back(miss.ttft);
    hit_ttft.push_back(hit.ttft);
    ratios.push_back(miss.ttft / hit.ttft);
    cached = hit.cached;
  }
  // The floor a hit approaches: the question's tokens alone, with no context to attend to.
  const int uncached = system_tokens + question_tokens - cached;
  const Result alone = run(engine, src.take(uncached), 1);
  const double hit = median(hit_ttft);
  std::printf("| request | TTFT | prompt tokens from cache |\n|---|---:|---:|\n");
  std::printf("| miss (cold, median of %d, new system prompt each) | %.3f s | 0 |\n", hits,
              median(miss_ttft));
  std::printf("| hit (median of %d, new question each) | %.3f s | %d |\n", hits, hit, cached);
  std::printf("| the hit's uncached tokens alone, no context | %.3f s | 0 |\n", alone.ttft);
  std::printf(
      "\nhit is %.1fx faster than miss (median of %d miss/hit pairs; target >= 30x); attending "
      "to the cached context costs the hit %.3f s\n",
      median(ratios), hits, hit - alone.ttft);

  // A near miss: one token changed late in the system prompt, as a timestamp would.
  std::vector<int32_t> changed = system;
  const int at = system_tokens - system_tokens / 10;
  changed[static_cast<size_t>(at)] = changed[static_cast<size_t>(at)] == 3 ? 4 : 3;
  const Result near = run(engine, concat(changed, src.take(question_tokens)), 1);
  const EngineStats st = engine.stats();
  std::printf("near miss (token %d changed): TTFT %.3f s, %d tokens from cache\n", at, near.ttft,
              near.cached);
  if (!st.recent_misses.empty()) {
    const PrefixMissRecord& m = st.recent_misses.back();
    std::printf("miss record: divergence at token %d, %d tokens matched, %d reused\n%s\n",
                m.divergent_position, m.matched_tokens, m.reused_tokens, m.summary.c_str());
  }
}

void bench_chat(const Setup& s, int turns, int system_tokens, int user_tokens, int reply_tokens) {
  std::printf(
      "\n## chat: %d turns, %d-token system prompt, %d-token user messages, %d-token "
      "replies, history resent each turn\n\n",
      turns, system_tokens, user_tokens, reply_tokens);
  std::printf("| prefix cache | prompt tokens sent | prompt tokens computed | total time |\n");
  std::printf("|---|---:|---:|---:|\n");
  uint64_t computed[2] = {0, 0};
  std::vector<std::vector<int32_t>> replies[2];
  for (int mode = 0; mode < 2; ++mode) {
    EngineOptions o = s.base;
    o.prefix_cache = mode == 1;
    o.max_context =
        std::max(o.max_context, system_tokens + turns * (user_tokens + reply_tokens) + 16);
    Engine engine(*s.model, *s.tokenizer, o);
    TokenSource src(s.model->config().vocab_size, 2);
    std::vector<int32_t> history = src.take(system_tokens);
    uint64_t sent = 0;
    const TimePoint start = Clock::now();
    for (int t = 0; t < turns; ++t) {
      history = concat(history, src.take(user_tokens));
      sent += history.size();
      const Result r = run(engine, history, reply_tokens);
      replies[mode].push_back(r.tokens);
      history = concat(history, r.tokens);
    }
    const double seconds = seconds_between(start, Clock::now());
    computed[mode] = engine.stats().computed_prompt_tokens;
    std::printf("| %s | %llu | %llu | %.2f s |\n", mode ? "on" : "off",
                static_cast<unsigned long long>(sent),
                static_cast<unsigned long long>(computed[mode]), seconds);
  }
  std::printf("\ncomputed with the cache: %.1f %% of without (target <= 20 %%); replies %s\n",
              100.0 * computed[1] / std::max<uint64_t>(1, computed[0]),
              replies[0] == replies[1] ? "identical" : "DIFFER");
}

void bench_cycle(const Setup& s, int conversations, int ram_room, int prefix_tokens,
                 int question_tokens, int rounds, const std::string& offload_dir) {
  std::printf(
      "\n## cycle: %d conversations round-robin (%d-token history + %d-token "
      "question), KV RAM for %d\n\n",
      conversations, prefix_tokens, question_tokens, ram_room);
  const ModelConfig& c = s.model->config();
  const KvLayout layout = KvLayout::for_model(c, s.base.kv_block_size, s.base.kv_type);
  const int blocks_per_conv =
      (prefix_tokens + question_tokens + 1 + layout.block_size - 1) / layout.block_size;
  const uint64_t kv_bytes =
      static_cast<uint64_t>(ram_room) * blocks_per_conv * layout.block_bytes();
  std::printf("KV memory %s (%d blocks of %s)\n\n", format_bytes(kv_bytes).c_str(),
              ram_room * blocks_per_conv, format_bytes(layout.block_bytes()).c_str());
  std::printf(
      "| mode | TTFT mean (last %d rounds) | from RAM | from tier | computed | tier "
      "in/out |\n|---|---:|---:|---:|---:|---:|\n",
      rounds - 1);
  struct Mode {
    const char* name;
    std::string ram, dir;
  };
  std::vector<Mode> modes = {{"recompute (cache, no tier)", "", ""},
                             {"offload tier (compressed RAM, lz4)", "4GiB", ""}};
  if (!offload_dir.empty()) modes.push_back({"offload tier (files)", "", offload_dir});
  double ttft[3] = {0, 0, 0};
  for (size_t m = 0; m < modes.size(); ++m) {
    if (!modes[m].dir.empty()) std::filesystem::remove_all(modes[m].dir);
    EngineOptions o = s.base;
    o.kv_memory = std::to_string(kv_bytes);
    o.kv_offload_ram = modes[m].ram;
    o.kv_offload_dir = modes[m].dir;
    o.kv_offload_size = "16GiB";
    o.max_context = std::max(o.max_context, prefix_tokens + question_tokens + 16);
    Engine engine(*s.model, *s.tokenizer, o);
    TokenSource src(c.vocab_size, 3);
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < conversations; ++i) prefixes.push_back(src.take(prefix_tokens));
    std::vector<double> measured;
    for (int round = 0; round < rounds; ++round) {
      for (int i = 0; i < conversations; ++i) {
        const Result r = run(engine, concat(prefixes[i], src.take(question_tokens)), 1);
        if (round > 0) measured.push_back(r.ttft);
      }
    }
    double sum = 0;
    for (double x : measured) sum += x;
    ttft[m] = sum / std::max<size_t>(1, measured.size());
    const PrefixCacheStats st = engine.stats().prefix_cache;
    std::printf("| %s | %.3f s | %llu | %llu | %llu | %s / %s |\n", modes[m].name, ttft[m],
                static_cast<unsigned long long>(st.ram_hit_tokens),
                static_cast<unsigned long long>(st.tier_hit_tokens),
                static_cast<unsigned long long>(st.computed_tokens),
                format_bytes(st.offload.bytes_in).c_str(),
                format_bytes(st.offload.bytes_out).c_str());
    if (!modes[m].dir.empty()) std::filesystem::remove_all(modes[m].dir);
  }
  std::printf("\noffload tier TTFT is %.1fx better than recomputing (target >= 3x)\n",
              ttft[0] / ttft[1]);
  if (modes.size() > 2) std::printf("file tier: %.1fx\n", ttft[0] / ttft[2]);
}

}  // namespace
}  // namespace rapide

int main(int argc, char** argv) {
  using namespace rapide;
  CLI::App app{"prefix caching and KV offload benchmark"};
  std::string model_path, scenario = "all", offload_dir;
  int threads = 0;
  bool quick = false;
  int system_tokens = 2700, question_tokens = 60, hits = 3;
  int turns = 10, chat_system = 400, user_tokens = 40, reply_tokens = 24;
  int conversations = 50, ram_room = 10, conv_tokens = 256, conv_question = 16, rounds = 2;
  app.add_option("model", model_path, "GGUF model")->required();
  app.add_option("--scenario", scenario, "all | ttft | chat | cycle")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (0 = physical cores)");
  app.add_flag("--quick", quick, "CI-sized run");
  app.add_option("--system-tokens", system_tokens)->capture_default_str();
  app.add_option("--question-tokens", question_tokens)->capture_default_str();
  app.add_option("--turns", turns)->capture_default_str();
  app.add_option("--conversations", conversations)->capture_default_str();
  app.add_option("--ram-conversations", ram_room)->capture_default_str();
  app.add_option("--conversation-tokens", conv_tokens)->capture_default_str();
  app.add_option("--rounds", rounds)->capture_default_str();
  app.add_option("--offload-dir", offload_dir, "also measure a file tier in this directory");
  std::string kv_type = "f16";
  app.add_option("--kv-type", kv_type, "f16 | f32 | q8_0 | q4_0")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    system_tokens = 600;
    question_tokens = 30;
    turns = 4;
    chat_system = 200;
    conversations = 8;
    ram_room = 2;
    conv_tokens = 128;
  }
  spdlog::set_level(spdlog::level::warn);
  try {
    auto file = std::make_shared<const ModelFile>(load_model(model_path));
    Model model(file);
    auto tokenizer = Tokenizer::create(file->tokenizer);
    Setup s{&model, tokenizer.get(), {}};
    s.base.threads = threads > 0 ? threads : physical_core_count();
    s.base.kv_type = parse_kv_type(kv_type);
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    const ModelConfig& c = model.config();
    std::printf(
        "# bench_prefix_cache\n\ncommand: %s\nmodel: %s (dim %d, %d layers, %d KV heads, "
        "context %d), %d threads, kernels %s\n",
        command.c_str(), model_path.c_str(), c.dim, c.n_layers, c.n_kv_heads, c.max_context,
        s.base.threads, isa_level_name(active_isa_level()));
    if (scenario == "all" || scenario == "ttft") {
      bench_ttft(s, system_tokens, question_tokens, hits);
    }
    if (scenario == "all" || scenario == "chat") {
      bench_chat(s, turns, chat_system, user_tokens, reply_tokens);
    }
    if (scenario == "all" || scenario == "cycle") {
      bench_cycle(s, conversations, ram_room, conv_tokens, conv_question, rounds, offload_dir);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
