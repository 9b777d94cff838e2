// The issue-16 KV cache benchmark (--kv-type f16 | q8_0 | q4_0), in-process on one model:
//
//   capacity  sequences of the full context that one --kv-memory budget holds per type
//             (the paged store the engine admits with, 16-position blocks);
//   decode    decode tok/s of one sequence at long context (the cache holds `context`
//             positions): every type's cache is filled once with the same tokens, then
//             rounds time `decode` steps of each type back to back (paired, in time: the
//             machine is shared), median per type.
//
// Prompt tokens are random ids (the figures depend on lengths, not on text).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/percentile.h"
#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/kv_rows.h"
#include "kv/memory_budget.h"
#include "kv/paged_kv_store.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"

namespace rapide {
namespace {

std::vector<KvType> parse_types(const std::string& list) {
  std::vector<KvType> types;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    types.push_back(parse_kv_type(list.substr(begin, end - begin), "--types"));
    begin = end + 1;
  }
  return types;
}

void section_capacity(const ModelConfig& c, const std::vector<KvType>& types,
                      const std::string& kv_memory, int context) {
  const uint64_t budget = parse_memory_budget(kv_memory);
  std::printf("\n## capacity: sequences of %d positions in --kv-memory %s\n\n", context,
              kv_memory.c_str());
  std::printf("| kv type | block (16 positions) | blocks | sequences | vs %s |\n",
              kv_type_name(types.front()));
  std::printf("|---|---:|---:|---:|---:|\n");
  int first = 0;
  for (KvType type : types) {
    const KvLayout layout = KvLayout::for_model(c, 16, type);
    auto kv = PagedKvStore::with_budget(layout, budget, context);
    int n = 0;
    while (kv->try_reserve(n, context)) ++n;
    if (first == 0) first = n;
    std::printf("| %s | %s | %d | %d | %.2fx |\n", kv_type_name(type),
                format_bytes(layout.block_bytes()).c_str(), kv->total_blocks(), n,
                first ? static_cast<double>(n) / first : 0.0);
  }
}

void section_decode(Model& model, const std::vector<KvType>& types, int context, int decode,
                    int rounds, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  std::printf("\n## decode at long context: %d cached positions, %d decode steps x %d rounds\n\n",
              context, decode, rounds);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> token(3, c.vocab_size - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(context));
  for (int32_t& t : prompt) t = token(rng);
  std::vector<std::unique_ptr<ContiguousKvStore>> stores;
  for (KvType type : types) {
    stores.push_back(std::make_unique<ContiguousKvStore>(c, 1, context + decode, type, 16));
    const TimePoint start = Clock::now();
    Batch batch;
    for (int begin = 0; begin < context; begin += 256) {
      batch.clear();
      for (int p = begin; p < std::min(context, begin + 256); ++p) {
        batch.add(prompt[static_cast<size_t>(p)], 0, p, p + 1 == context);
      }
      model.forward(batch, *stores.back(), pool);
    }
    std::printf("(%s cache filled: prefill %.0f tok/s)\n", kv_type_name(type),
                context / seconds_between(start, Clock::now()));
  }
  std::vector<std::vector<double>> rates(types.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < types.size(); ++i) {
      Batch batch;
      const TimePoint start = Clock::now();
      for (int s = 0; s < decode; ++s) {
        batch.clear();
        batch.add(token(rng), 0, context + s, true);
        model.forward(batch, *stores[i], pool);
      }
      rates[i].push_back(decode / seconds_between(start, Clock::now()));
    }
  }
  std::printf("\n| kv type | decode tok/s (median) | vs %s |\n|---|---:|---:|\n",
              kv_type_name(types.front()));
  for (size_t i = 0; i < types.size(); ++i) {
    std::printf("| %s | %.1f | %.2fx |\n", kv_type_name(types[i]), median(rates[i]),
                median(rates[i]) / median(rates[0]));
  }
}

}  // namespace
}  // namespace rapide

int main(int argc, char** argv) {
  using namespace rapide;
  CLI::App app{"quantized KV cache benchmark: capacity and long-context decode per --kv-type"};
  std::string model_path, types_list = "f16,q8_0,q4_0", kv_memory = "256MiB";
  int threads = 0, context = 2048, decode = 32, rounds = 5;
  bool quick = false;
  app.add_option("model", model_path, "GGUF model")->required();
  app.add_option("--types", types_list, "KV types, the first is the baseline")
      ->capture_default_str();
  app.add_option("--kv-memory", kv_memory, "budget of the capacity table")->capture_default_str();
  app.add_option("--context", context, "positions per sequence / cached before decoding")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  app.add_option("--decode", decode, "decode steps per round")->capture_default_str();
  app.add_option("--rounds", rounds, "paired rounds")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (0 = physical cores)");
  app.add_flag("--quick", quick, "CI-sized run");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    context = std::min(context, 512);
    decode = 8;
    rounds = 2;
  }
  try {
    const std::vector<KvType> types = parse_types(types_list);
    auto file = std::make_shared<const ModelFile>(load_model(model_path));
    Model model(file);
    ThreadPool pool(threads > 0 ? threads : physical_core_count());
    std::printf("# KV cache types on %s (%s, %d threads)\n", model_path.c_str(),
                cpu_features().describe().c_str(), pool.size());
    section_capacity(model.config(), types, kv_memory, context);
    section_decode(model, types, context, decode, rounds, pool);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
