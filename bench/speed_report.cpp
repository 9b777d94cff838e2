// bench_speed_report MODEL [--threads N] [--prompt 128] [--decode 64] [--batch-sizes 1,4,16,32]
//                          [--act-quant int8|off]
//
// Measures, in one run: this machine's read bandwidth (the decode roofline), decode tok/s at
// batch 1 as a fraction of that roofline, prefill tok/s and GFLOP/s for a prompt, and the
// aggregate decode speed of several sequences decoding together. Prints one table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "base/percentile.h"
#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/bandwidth.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"

namespace {

using namespace rapide;


// Decode `steps` tokens for `n_seqs` sequences after a short shared-length prompt; returns
// aggregate generated tokens per second (median over repeats).
double decode_speed(Model& model, ThreadPool& pool, int n_seqs, int prompt_len, int steps,
                    int repeats) {
  std::vector<double> rates;
  std::mt19937 rng(1);
  const int vocab = model.config().vocab_size;
  for (int r = 0; r < repeats; ++r) {
    ContiguousKvStore kv(model.config(), n_seqs, prompt_len + steps + 1);
    Batch batch;
    for (int s = 0; s < n_seqs; ++s) {
      for (int p = 0; p < prompt_len; ++p) batch.add(rng() % vocab, s, p, p + 1 == prompt_len);
    }
    model.forward(batch, kv, pool);
    const TimePoint start = Clock::now();
    for (int step = 0; step < steps; ++step) {
      batch.clear();
      for (int s = 0; s < n_seqs; ++s) batch.add(rng() % vocab, s, prompt_len + step, true);
      model.forward(batch, kv, pool);
    }
    rates.push_back(static_cast<double>(steps) * n_seqs / seconds_between(start, Clock::now()));
  }
  return median(rates);
}

double prefill_speed(Model& model, ThreadPool& pool, int prompt_len, int repeats) {
  std::vector<double> rates;
  std::mt19937 rng(2);
  const int vocab = model.config().vocab_size;
  for (int r = 0; r < repeats; ++r) {
    ContiguousKvStore kv(model.config(), 1, prompt_len + 1);
    Batch batch;
    for (int p = 0; p < prompt_len; ++p) batch.add(rng() % vocab, 0, p, p + 1 == prompt_len);
    const TimePoint start = Clock::now();
    model.forward(batch, kv, pool);
    rates.push_back(prompt_len / seconds_between(start, Clock::now()));
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"decode/prefill speed of a model against this machine's limits"};
  std::string model_path;
  int threads = 0, prompt = 128, decode = 64, repeats = 5;
  std::string batch_sizes = "1", act_quant = "int8";
  app.add_option("model", model_path, "model file")->required();
  app.add_option("-t,--threads", threads, "threads (default: physical cores)");
  app.add_option("--prompt", prompt, "prefill prompt length")->capture_default_str();
  app.add_option("--decode", decode, "decode steps")->capture_default_str();
  app.add_option("--repeats", repeats, "repeats (median reported)")->capture_default_str();
  app.add_option("--batch-sizes", batch_sizes, "sequences decoding together, comma separated")
      ->capture_default_str();
  app.add_option("--act-quant", act_quant, "int8 | off (see rapide --act-quant)")
      ->check(CLI::IsMember({"int8", "off"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads <= 0) threads = physical_core_count();

  ThreadPool pool(threads);
  auto file = std::make_shared<const ModelFile>(load_model(model_path));
  Model model(file, act_quant == "off" ? ActQuant::kOff : ActQuant::kInt8);
  const double weight_bytes = static_cast<double>(model.weight_bytes());
  const double n_params = static_cast<double>(model.matmul_parameters());

  const double bandwidth = measure_read_bandwidth(pool);
  std::printf("model: %s (%.1f MiB of weights read per step, %.1f M parameters in matrices)\n",
              model_path.c_str(), weight_bytes / 1048576.0, n_params / 1e6);
  std::printf("machine: %d threads, kernels %s, read bandwidth %.1f GB/s -> roofline %.1f tok/s\n",
              threads, isa_level_name(active_isa_level()), bandwidth / 1e9,
              bandwidth / weight_bytes);

  const double prefill = prefill_speed(model, pool, prompt, repeats);
  std::printf("prefill %d tokens: %.1f tok/s, %.1f GFLOP/s\n", prompt, prefill,
              prefill * 2.0 * n_params / 1e9);
  std::stringstream ss(batch_sizes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int n = std::stoi(item);
    if (n == 1) {
      // On a shared VM the bandwidth a probe gets can change from one second to the next
      // (it was seen to alternate between ~33 and ~60 GB/s): each decode run is paired with
      // a probe taken just before it, and the median of the pairs' ratios is reported.
      std::vector<double> rates, probes, ratios;
      for (int r = 0; r < repeats; ++r) {
        const double probe = measure_read_bandwidth(pool, size_t{256} << 20);
        const double rate = decode_speed(model, pool, 1, 16, decode, 1);
        probes.push_back(probe);
        rates.push_back(rate);
        ratios.push_back(rate * weight_bytes / probe);
      }
      const auto [low, high] = std::minmax_element(probes.begin(), probes.end());
      std::printf(
          "decode batch 1: %.1f tok/s = %.1f %% of the bandwidth roofline "
          "(median of %d decode runs, each against a probe taken just before it: "
          "%.1f-%.1f GB/s)\n",
          median(rates), 100.0 * median(ratios), repeats, *low / 1e9, *high / 1e9);
    } else {
      const double rate = decode_speed(model, pool, n, 16, decode, repeats);
      std::printf("decode batch %d: %.1f tok/s aggregate, %.1f GFLOP/s\n", n, rate,
                  rate * 2.0 * n_params / 1e9);
    }
  }
  return 0;
}
