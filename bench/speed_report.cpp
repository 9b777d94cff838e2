// bench_speed_report MODEL [--threads N] [--prompt 128] [--decode 64] [--batch-sizes 1,4,16,32]
//                          [--batch-prompt 16] [--kv-block-size 16]
//                          [--act-quant int8|off|bf16] [--kv-type f16|f32|q8_0|q4_0]
//                          [--kv-in-cache] [--decode-context 16] [--compare B,C,...]
//
// Measures, in one run: this machine's read bandwidth (the decode roofline), decode tok/s at
// batch 1 as a fraction of that roofline, prefill tok/s and GFLOP/s for a prompt, and the
// aggregate decode speed of several sequences decoding together. Prints one table. Each
// batched decode run follows a prefill run (the median of 3) of its own, and the decode
// step's GFLOP/s per CPU-second is also given as the median of those pairs' ratios: the
// machine's speed drifts between minutes, and the ratio of two medians taken apart moved
// by up to 10 points from one run to the next (80-90 % in two runs of the same build).
// GFLOP/s count the matrices' flops; a second line counts attention's QK and PV flops as
// well, which a decode row at a long context does more of than a prefill token.
// --decode-context sets the context the batch-1 decode runs start from (a prompt of that many
// tokens before them), so a run at 2k context times what attention's K/V reads add to a step.
// --compare B,C,... instead times batch-1 decode of MODEL and of each of B, C, ... alternated in
// one process (--repeats rounds, the order rotated each round) and prints each one's speed and
// its ratio to MODEL's within the rounds: on a shared machine whose speed halves or doubles
// from one second to the next, runs seconds apart in separate processes do not compare.
// --kv-in-cache also times each batched decode with every sequence's K/V reads served from
// the first sequence's blocks (CacheResidentKv below), alternated run by run with the real
// one: the difference is what reading the K/V from DRAM costs the step.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/percentile.h"
#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/bandwidth.h"
#include "kernels/kv_rows.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"

namespace {

using namespace rapide;

// Tokens per wall second and per CPU-second of `threads` cores (tokens * threads / process CPU
// seconds: what that many whole cores give; spin-waits count, so it underestimates). On a
// shared machine the wall figure follows the other load, the CPU one much less.
struct Rate {
  double wall = 0;
  double cpu = 0;
};

// A ContiguousKvStore whose sequences all read and write the first sequence's blocks (block
// b of any sequence is block b mod blocks-per-sequence): the block tables stay distinct, so
// attention plans and computes exactly what it does for distinct contexts, but the K/V it
// reads is one sequence's, which stays in cache. Only for timing: the contents are garbage.
class CacheResidentKv final : public KvStore {
 public:
  CacheResidentKv(const ModelConfig& config, int n_sequences, int max_context, KvType type,
                  int block_size)
      : inner_(config, n_sequences, max_context, type, block_size),
        blocks_per_sequence_(inner_.max_context() / inner_.layout().block_size) {}
  const KvLayout& layout() const override { return inner_.layout(); }
  std::span<const int32_t> block_table(int32_t seq_id) const override {
    return inner_.block_table(seq_id);
  }
  uint8_t* block_data(int32_t block) override {
    return inner_.block_data(block % blocks_per_sequence_);
  }

 private:
  ContiguousKvStore inner_;
  int blocks_per_sequence_;
};

// Decode `steps` tokens for `n_seqs` sequences after a prompt of prompt_len tokens each;
// returns aggregate generated tokens per second (medians over repeats). `in_cache`: through
// CacheResidentKv.
Rate decode_speed(Model& model, ThreadPool& pool, int n_seqs, int prompt_len, int steps,
                  int repeats, int kv_block, KvType kv_type, bool in_cache = false) {
  std::vector<double> rates, cpu_rates;
  std::mt19937 rng(1);
  const int vocab = model.config().vocab_size;
  for (int r = 0; r < repeats; ++r) {
    std::unique_ptr<KvStore> store;
    if (in_cache) {
      store = std::make_unique<CacheResidentKv>(model.config(), n_seqs, prompt_len + steps + 1,
                                                kv_type, kv_block);
    } else {
      store = std::make_unique<ContiguousKvStore>(model.config(), n_seqs, prompt_len + steps + 1,
                                                  kv_type, kv_block);
    }
    KvStore& kv = *store;
    Batch batch;
    for (int s = 0; s < n_seqs; ++s) {
      for (int p = 0; p < prompt_len; ++p) batch.add(rng() % vocab, s, p, p + 1 == prompt_len);
    }
    model.forward(batch, kv, pool);
    const TimePoint start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    for (int step = 0; step < steps; ++step) {
      batch.clear();
      for (int s = 0; s < n_seqs; ++s) batch.add(rng() % vocab, s, prompt_len + step, true);
      model.forward(batch, kv, pool);
    }
    const double tokens = static_cast<double>(steps) * n_seqs;
    rates.push_back(tokens / seconds_between(start, Clock::now()));
    cpu_rates.push_back(tokens * pool.size() / (process_cpu_seconds() - cpu_start));
  }
  return {median(rates), median(cpu_rates)};
}

Rate prefill_speed(Model& model, ThreadPool& pool, int prompt_len, int repeats) {
  std::vector<double> rates, cpu_rates;
  std::mt19937 rng(2);
  const int vocab = model.config().vocab_size;
  for (int r = 0; r < repeats; ++r) {
    ContiguousKvStore kv(model.config(), 1, prompt_len + 1);
    Batch batch;
    for (int p = 0; p < prompt_len; ++p) batch.add(rng() % vocab, 0, p, p + 1 == prompt_len);
    const TimePoint start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    model.forward(batch, kv, pool);
    rates.push_back(prompt_len / seconds_between(start, Clock::now()));
    cpu_rates.push_back(static_cast<double>(prompt_len) * pool.size() /
                        (process_cpu_seconds() - cpu_start));
  }
  return {median(rates), median(cpu_rates)};
}

// Attention's flops per token, averaged over `count` tokens that attend to first,
// first + 1, ..., first + count - 1 positions (their own included): the QK dot products and
// the PV sums, 2 flops each per query head, dimension and visible position, per layer (a
// windowed layer sees at most its window). The matrix count above leaves them out, and a
// decode step at contexts 128-192 does 2.5 times a 128-token prefill's per token.
double attention_flops_per_token(const ModelConfig& c, int first, int count) {
  double total = 0;
  for (int t = 0; t < count; ++t) {
    for (int layer = 0; layer < c.n_layers; ++layer) {
      const int seen = c.windowed(layer) ? std::min(first + t, c.sliding_window) : first + t;
      total += 4.0 * static_cast<double>(c.q_dim()) * seen;
    }
  }
  return count > 0 ? total / count : 0.0;
}

// Bytes of one cached element: f32, f16, or a q8_0 / q4_0 code with its share of a 32-value
// group's f16 scale (for the expanded layout, which no store here holds).
double kv_element_bytes(KvType type) {
  switch (type) {
    case KvType::kF32:
      return 4.0;
    case KvType::kF16:
      return 2.0;
    case KvType::kQ8_0:
      return 34.0 / 32.0;
    case KvType::kQ4_0:
      return 18.0 / 32.0;
  }
  return 2.0;
}

// Bytes one position takes in one layer of a cache: the engine's own layout (KvLayout, whatever
// it holds: every KV head's K and V, or MLA's latent row), or with `expanded` an MLA model's K
// and V expanded per head (n_heads x (key + value) values), what MLA saves against.
double kv_position_bytes(const ModelConfig& c, KvType type, int block_size, bool expanded) {
  if (expanded && c.mla()) {
    return static_cast<double>(c.n_heads) * (c.mla_nope_dim + c.mla_rope_dim + c.mla_v_dim) *
           kv_element_bytes(type);
  }
  const KvLayout layout = KvLayout::for_model(c, block_size, type);
  return static_cast<double>(layout.block_bytes()) / layout.block_size / layout.n_layers;
}

// K/V bytes a decoded token at `context` reads, over all layers (a windowed layer at most its
// window's positions).
double kv_read_bytes(const ModelConfig& c, int context, KvType type, int block_size,
                     bool expanded) {
  double total = 0;
  for (int layer = 0; layer < c.n_layers; ++layer) {
    const int seen = c.windowed(layer) ? std::min(context, c.sliding_window) : context;
    total += kv_position_bytes(c, type, block_size, expanded) * seen;
  }
  return total;
}

// One line: the K/V bytes a position caches in each layer and that a token at `context` reads
// (what attention reads besides the weights).
void print_kv_reads(const ModelConfig& c, int context, KvType type, int block_size,
                    const std::string& name) {
  std::printf(
      "K/V cache (%s): %.0f bytes a position in each layer; a token at context %d reads "
      "%.2f MiB of K/V",
      name.c_str(), kv_position_bytes(c, type, block_size, false), context,
      kv_read_bytes(c, context, type, block_size, false) / 1048576.0);
  if (c.mla()) {
    std::printf(" (MLA's latent rows; K and V expanded per head: %.0f bytes, %.2f MiB)",
                kv_position_bytes(c, type, block_size, true),
                kv_read_bytes(c, context, type, block_size, true) / 1048576.0);
  }
  std::printf("\n");
}

// --compare: batch-1 decode of models[0] and the others alternated, `rounds` rounds with the
// order rotated each round; per model the median and best tok/s, and for the others the
// median (and range) of their ratio to models[0] within each round and the ratio of the bests.
void compare_decode(const std::vector<Model*>& models, const std::vector<std::string>& paths,
                    ThreadPool& pool, int rounds, int context, int steps, int kv_block,
                    KvType kv_type) {
  const size_t n = models.size();
  std::vector<std::vector<double>> rates(n), ratios(n);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> round(n);
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % n;
      round[i] = decode_speed(*models[i], pool, 1, context, steps, 1, kv_block, kv_type).wall;
      rates[i].push_back(round[i]);
    }
    for (size_t i = 1; i < n; ++i) ratios[i].push_back(round[i] / round[0]);
  }
  const double best0 = *std::max_element(rates[0].begin(), rates[0].end());
  for (size_t i = 0; i < n; ++i) {
    const double best = *std::max_element(rates[i].begin(), rates[i].end());
    std::printf("decode batch 1, %s: %.1f tok/s median, %.1f best of %d runs (contexts %d-%d)",
                paths[i].c_str(), median(rates[i]), best, rounds, context, context + steps);
    if (i > 0) {
      std::printf(
          "; to the first: %.3f (median of the rounds' ratios, range %.3f-%.3f), %.3f "
          "(ratio of the bests)",
          median(ratios[i]), *std::min_element(ratios[i].begin(), ratios[i].end()),
          *std::max_element(ratios[i].begin(), ratios[i].end()), best / best0);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"decode/prefill speed of a model against this machine's limits"};
  std::string model_path;
  int threads = 0, prompt = 128, decode = 64, repeats = 5, batch_prompt = 16, kv_block = 16;
  int decode_context = 16;
  std::string batch_sizes = "1", act_quant = "int8", kv_type_name = "f16";
  app.add_option("model", model_path, "model file")->required();
  app.add_option("-t,--threads", threads, "threads (default: physical cores)");
  app.add_option("--prompt", prompt, "prefill prompt length")->capture_default_str();
  app.add_option("--decode", decode, "decode steps")->capture_default_str();
  app.add_option("--repeats", repeats, "repeats (median reported)")->capture_default_str();
  app.add_option("--batch-sizes", batch_sizes, "sequences decoding together, comma separated")
      ->capture_default_str();
  app.add_option("--batch-prompt", batch_prompt,
                 "prompt tokens of each sequence before a batched decode (its starting context)")
      ->capture_default_str();
  app.add_option("--decode-context", decode_context,
                 "prompt tokens before each batch-1 decode run (its starting context)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--kv-block-size", kv_block,
                 "positions per KV block in the decode runs (the engine's --kv-block-size: the "
                 "blocks' memory layout, all layers of 16 positions per block by default)")
      ->capture_default_str();
  app.add_option("--act-quant", act_quant, "int8 | off | bf16 (see rapide --act-quant)")
      ->check(CLI::IsMember({"int8", "off", "bf16"}))
      ->capture_default_str();
  bool kv_in_cache = false;
  app.add_flag("--kv-in-cache", kv_in_cache,
               "also time each batched decode with every sequence's K/V reads served from the "
               "first sequence's blocks (cache-resident; same arithmetic), alternated with the "
               "real runs: what reading the K/V from DRAM costs a step");
  app.add_option("--kv-type", kv_type_name,
                 "f16 | f32 | q8_0 | q4_0: the KV cache's element type in the decode runs (the "
                 "engine's --kv-type)")
      ->check(CLI::IsMember({"f16", "f32", "q8_0", "q4_0"}))
      ->capture_default_str();
  std::vector<std::string> compare;
  app.add_option("--compare", compare,
                 "other model files: time batch-1 decode of MODEL and each of these alternated "
                 "in this process (--repeats rounds) and print their ratios to MODEL's; nothing "
                 "else is measured")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  const KvType kv_type = parse_kv_type(kv_type_name);
  if (threads <= 0) threads = physical_core_count();

  ThreadPool pool(threads);
  auto file = std::make_shared<const ModelFile>(load_model(model_path));
  Model model(file, act_quant_from_name(act_quant));
  const double weight_bytes = static_cast<double>(model.weight_bytes());
  const double n_params = static_cast<double>(model.matmul_parameters());

  const double bandwidth = measure_read_bandwidth(pool);
  std::printf("model: %s (%.1f MiB of weights read per step, %.1f M parameters in matrices)\n",
              model_path.c_str(), weight_bytes / 1048576.0, n_params / 1e6);
  print_kv_reads(model.config(), decode_context + decode, kv_type, kv_block, kv_type_name);
  if (!compare.empty()) {
    std::vector<std::unique_ptr<Model>> others;
    std::vector<Model*> models = {&model};
    std::vector<std::string> paths = {model_path};
    for (const std::string& path : compare) {
      others.push_back(std::make_unique<Model>(std::make_shared<const ModelFile>(load_model(path)),
                                               act_quant_from_name(act_quant)));
      models.push_back(others.back().get());
      paths.push_back(path);
      std::printf("model: %s (%.1f MiB of weights read per step)\n", path.c_str(),
                  static_cast<double>(others.back()->weight_bytes()) / 1048576.0);
      print_kv_reads(others.back()->config(), decode_context + decode, kv_type, kv_block,
                     kv_type_name);
    }
    compare_decode(models, paths, pool, repeats, decode_context, decode, kv_block, kv_type);
    return 0;
  }
  std::printf("machine: %d threads, kernels %s, read bandwidth %.1f GB/s -> roofline %.1f tok/s\n",
              threads, isa_level_name(active_isa_level()), bandwidth / 1e9,
              bandwidth / weight_bytes);

  // GFLOP/s count 2 per matrix parameter per token. A prefill computes the output head for
  // its last token only, a decode step for every row: "computed" removes what prefill skips.
  const double head_params = static_cast<double>(model.config().vocab_size) * model.config().dim;
  const double prefill_flops = 2.0 * (n_params - head_params * (prompt - 1) / prompt);
  const double prefill_attention = attention_flops_per_token(model.config(), 1, prompt);
  const Rate prefill = prefill_speed(model, pool, prompt, repeats);
  std::printf(
      "prefill %d tokens: %.1f tok/s, %.1f GFLOP/s (%.1f computed); per CPU-second of %d cores: "
      "%.1f tok/s, %.1f GFLOP/s computed (%.1f with attention's)\n",
      prompt, prefill.wall, prefill.wall * 2.0 * n_params / 1e9, prefill.wall * prefill_flops / 1e9,
      threads, prefill.cpu, prefill.cpu * prefill_flops / 1e9,
      prefill.cpu * (prefill_flops + prefill_attention) / 1e9);
  std::stringstream ss(batch_sizes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int n = std::stoi(item);
    if (n == 1) {
      // On a shared VM the bandwidth a probe gets can change from one second to the next
      // (it was seen to alternate between ~33 and ~60 GB/s): each decode run is paired with
      // a probe taken just before it, and the median of the pairs' ratios is reported. The
      // probe's passes also differ among themselves by 10-20 % within its ~50 ms
      // (kernels/bandwidth.h): the ratio is given against its best pass (the roofline) and
      // against its median pass, the like-for-like figure for a decode run's average.
      std::vector<double> rates, bests, ratios, median_ratios;
      for (int r = 0; r < repeats; ++r) {
        const ReadBandwidth probe = measure_read_bandwidth_passes(pool, size_t{256} << 20, 9);
        const double rate =
            decode_speed(model, pool, 1, decode_context, decode, 1, kv_block, kv_type).wall;
        bests.push_back(probe.best);
        rates.push_back(rate);
        ratios.push_back(rate * weight_bytes / probe.best);
        median_ratios.push_back(rate * weight_bytes / probe.median);
      }
      const auto [low, high] = std::minmax_element(bests.begin(), bests.end());
      const std::string at_context = decode_context == 16
                                         ? ""
                                         : " at contexts " + std::to_string(decode_context) + "-" +
                                               std::to_string(decode_context + decode);
      std::printf(
          "decode batch 1: %.1f tok/s = %.1f %% of the bandwidth roofline, %.1f %% of the "
          "probe's median pass (median of %d decode runs, each against a probe of 9 passes "
          "taken just before it: best %.1f-%.1f GB/s)%s\n",
          median(rates), 100.0 * median(ratios), 100.0 * median(median_ratios), repeats, *low / 1e9,
          *high / 1e9, at_context.c_str());
    } else {
      // Each decode run paired with prefill runs just before it (see the top of the file).
      std::vector<double> wall, cpu, cached_wall, cached_cpu, ratios, cached_ratios, all_ratios;
      const double step_attention =
          attention_flops_per_token(model.config(), batch_prompt + 1, decode);
      for (int r = 0; r < repeats; ++r) {
        const Rate paired_prefill = prefill_speed(model, pool, prompt, 3);  // median of 3
        const double prefill_rate = paired_prefill.cpu * prefill_flops;
        const Rate real = decode_speed(model, pool, n, batch_prompt, decode, 1, kv_block, kv_type);
        wall.push_back(real.wall);
        cpu.push_back(real.cpu);
        ratios.push_back(real.cpu * 2.0 * n_params / prefill_rate);
        all_ratios.push_back(real.cpu * (2.0 * n_params + step_attention) /
                             (paired_prefill.cpu * (prefill_flops + prefill_attention)));
        if (kv_in_cache) {
          // Paired in time as well: the same arithmetic with K/V reads served from cache.
          const Rate resident =
              decode_speed(model, pool, n, batch_prompt, decode, 1, kv_block, kv_type, true);
          cached_wall.push_back(resident.wall);
          cached_cpu.push_back(resident.cpu);
          cached_ratios.push_back(resident.cpu * 2.0 * n_params / prefill_rate);
        }
      }
      const Rate rate = {median(wall), median(cpu)};
      std::printf(
          "decode batch %d (contexts %d-%d): %.1f tok/s aggregate, %.1f GFLOP/s; per CPU-second "
          "of %d cores: %.1f tok/s, %.1f GFLOP/s (%.0f %% of prefill's computed; median of %d "
          "runs each paired with the median of 3 prefill runs before it: %.0f %%, range %.0f-%.0f "
          "%%)\n",
          n, batch_prompt, batch_prompt + decode, rate.wall, rate.wall * 2.0 * n_params / 1e9,
          threads, rate.cpu, rate.cpu * 2.0 * n_params / 1e9,
          100.0 * rate.cpu * 2.0 * n_params / (prefill.cpu * prefill_flops), repeats,
          100.0 * median(ratios), 100.0 * *std::min_element(ratios.begin(), ratios.end()),
          100.0 * *std::max_element(ratios.begin(), ratios.end()));
      std::printf(
          "decode batch %d, attention's flops counted as well (%.1f MFLOP a row against %.1f a "
          "prefill token, the matrices' %.1f and %.1f): %.1f GFLOP/s per CPU-second, %.0f %% of "
          "the paired prefill's (median; range %.0f-%.0f %%)\n",
          n, step_attention / 1e6, prefill_attention / 1e6, 2.0 * n_params / 1e6,
          prefill_flops / 1e6, rate.cpu * (2.0 * n_params + step_attention) / 1e9,
          100.0 * median(all_ratios),
          100.0 * *std::min_element(all_ratios.begin(), all_ratios.end()),
          100.0 * *std::max_element(all_ratios.begin(), all_ratios.end()));
      if (kv_in_cache) {
        const Rate cached = {median(cached_wall), median(cached_cpu)};
        std::printf(
            "decode batch %d, K/V read from cache instead of DRAM: %.1f tok/s aggregate; per "
            "CPU-second of %d cores: %.1f tok/s, %.1f GFLOP/s (%.0f %% of the paired prefill's "
            "computed, median); reading the K/V from DRAM costs %.2f of %.2f ms per step\n",
            n, cached.wall, threads, cached.cpu, cached.cpu * 2.0 * n_params / 1e9,
            100.0 * median(cached_ratios), 1e3 * n / rate.wall - 1e3 * n / cached.wall,
            1e3 * n / rate.wall);
      }
    }
  }
  return 0;
}
