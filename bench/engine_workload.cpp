// bench_engine_workload MODEL [--quick] [--sections batching,capacity,decode] [...]
//
// The issue-4 engine benchmark, in-process (no HTTP): one workload of many requests with
// random prompt and output lengths, all arriving together, driven through the Engine API.
// Prints three tables:
//   1. batching   output tok/s and p50/p99 TTFT, --batching continuous vs static;
//   2. capacity   most sequences one KV budget holds, paged vs contiguous at context 2048,
//                 and the KV memory a paged sequence wastes (computed on a PagedKvStore
//                 with the workload's lengths, then observed on the running engine);
//   3. decode     aggregate decode tok/s of 1, 4, 16, 32 sequences decoding together,
//                 next to the bare forward pass, so engine overhead shows as the difference.
// Figures come from the engine's own per-step statistics (EngineStats.recent_steps).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/percentile.h"
#include "base/clock.h"
#include "base/cpu_features.h"
#include "base/logging.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "formats/model_file.h"
#include "kernels/bandwidth.h"
#include "kv/memory_budget.h"
#include "kv/paged_kv_store.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace rapide;

struct WorkloadSpec {
  int requests = 64;
  int prompt_min = 16, prompt_max = 512;
  int output_min = 10, output_max = 400;
  uint64_t seed = 42;
};

struct RequestSpec {
  std::vector<int32_t> prompt;
  int max_tokens = 0;
};



// Uniform lengths, random token prompts (ids above the usual control tokens, so the
// tokenizer's BOS/EOS never appear mid-prompt). `scale` shrinks the ranges for models whose
// context cannot hold the longest prompt plus output.
std::vector<RequestSpec> make_workload(const WorkloadSpec& w, int vocab, double scale) {
  std::mt19937_64 rng(w.seed);
  auto scaled = [scale](int n) { return std::max(1, static_cast<int>(std::lround(n * scale))); };
  std::uniform_int_distribution<int> prompt_len(scaled(w.prompt_min), scaled(w.prompt_max));
  std::uniform_int_distribution<int> output_len(scaled(w.output_min), scaled(w.output_max));
  std::uniform_int_distribution<int32_t> token(std::min(3, vocab - 1), vocab - 1);
  std::vector<RequestSpec> out(static_cast<size_t>(w.requests));
  for (RequestSpec& r : out) {
    r.prompt.resize(static_cast<size_t>(prompt_len(rng)));
    for (int32_t& t : r.prompt) t = token(rng);
    r.max_tokens = output_len(rng);
  }
  return out;
}

// Collects what the engine reports per request. Events arrive on the engine thread; a
// per-request sink carries the request's index so nothing has to map ids after submit().
class Collector {
 public:
  explicit Collector(size_t n) : results_(n) {}

  struct Result {
    int tokens = 0;
    bool finished = false;
    FinishReason reason = FinishReason::kLength;
    RequestTimings timings;
    RequestMetrics metrics;
  };

  void on_event(size_t index, TokenEvent&& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    Result& r = results_[index];
    if (e.token >= 0) r.tokens++;
    if (!e.finished) return;
    r.finished = true;
    r.reason = e.finish_reason;
    r.timings = e.timings;
    r.metrics = e.metrics;
    finished_++;
    done_.notify_all();
  }
  // Waits up to `timeout` for every request to finish; returns whether they all did.
  bool wait_all(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_.wait_for(lock, timeout, [this] { return finished_ == results_.size(); });
  }
  std::vector<Result> results() {
    std::lock_guard<std::mutex> lock(mutex_);
    return results_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<Result> results_;
  size_t finished_ = 0;
};

class IndexedSink final : public EventSink {
 public:
  IndexedSink(Collector& c, size_t index) : collector_(c), index_(index) {}
  void on_event(TokenEvent&& e) override { collector_.on_event(index_, std::move(e)); }

 private:
  Collector& collector_;
  size_t index_;
};

// The engine keeps only its last steps; polling often enough keeps every one of them.
class StepRecorder {
 public:
  // Returns whether the engine had nothing left waiting or running.
  bool poll(const Engine& engine) {
    const EngineStats s = engine.stats();
    for (const StepStats& st : s.recent_steps) {
      if (!steps_.empty() && st.start <= steps_.back().start) continue;
      steps_.push_back(st);
      max_running_ = std::max(max_running_, st.running);
    }
    max_running_ = std::max(max_running_, s.running);
    total_steps_ = s.steps;
    preemptions_ = s.preemptions;
    return s.running == 0 && s.waiting == 0;
  }
  const std::vector<StepStats>& steps() const { return steps_; }
  int max_running() const { return max_running_; }
  uint64_t total_steps() const { return total_steps_; }
  uint64_t preemptions() const { return preemptions_; }

 private:
  std::vector<StepStats> steps_;
  int max_running_ = 0;
  uint64_t total_steps_ = 0;
  uint64_t preemptions_ = 0;
};

struct RunResult {
  double seconds = 0.0;          // first submit to last finish
  double cpu_seconds = 0.0;      // process CPU time over the same span
  int64_t output_tokens = 0;     // of finished requests
  int64_t generated_tokens = 0;  // of all, aborted ones included
  int admitted = 0;              // requests that got at least one token
  int64_t prompt_tokens = 0;
  int finished = 0;
  std::vector<double> ttft;  // seconds, finished requests
  std::vector<StepStats> steps;
  uint64_t engine_steps = 0;
  uint64_t preemptions = 0;
  int max_running = 0;
  bool complete = true;
};

// Submits the whole workload at once and waits for it (or for `max_steps` engine steps when
// not 0, after which the rest
// is aborted: the capacity observation only needs the first admission rounds).
RunResult run_workload(Model& model, const Tokenizer& tok, const EngineOptions& options,
                       const std::vector<RequestSpec>& workload, bool stream_text,
                       float temperature, uint64_t max_steps) {
  Collector collector(workload.size());
  StepRecorder recorder;
  RunResult out;
  {
    Engine engine(model, tok, options);
    std::vector<Request> requests;
    for (size_t i = 0; i < workload.size(); ++i) {
      Request r;
      r.prompt = workload[i].prompt;
      r.sampling.temperature = temperature;
      r.sampling.seed = 1000 + i;
      r.sampling.max_tokens = workload[i].max_tokens;
      r.sampling.ignore_eos = true;
      r.stream_text = stream_text;
      r.sink = std::make_shared<IndexedSink>(collector, i);
      requests.push_back(std::move(r));
    }
    // Arriving together: the scheduler sees every request at its first step.
    const TimePoint start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    const std::vector<RequestId> ids = engine.submit_all(std::move(requests));
    while (!collector.wait_all(std::chrono::milliseconds(5))) {
      recorder.poll(engine);
      if (max_steps != 0 && recorder.total_steps() >= max_steps) {
        out.complete = false;
        for (RequestId id : ids) engine.abort(id);
        collector.wait_all(std::chrono::minutes(1));
        break;
      }
    }
    // The last step's figures are recorded after its final events went out.
    for (int i = 0; i < 1000 && !recorder.poll(engine); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    TimePoint last = start;
    for (const Collector::Result& r : collector.results()) {
      out.generated_tokens += r.tokens;
      out.admitted += r.tokens > 0 ? 1 : 0;
      if (r.reason == FinishReason::kAbort || r.reason == FinishReason::kError) continue;
      out.finished++;
      out.output_tokens += r.tokens;
      out.ttft.push_back(r.metrics.ttft_seconds);
      last = std::max(last, r.timings.finished);
    }
    for (const RequestSpec& r : workload)
      out.prompt_tokens += static_cast<int64_t>(r.prompt.size());
    out.seconds = seconds_between(start, out.complete ? last : Clock::now());
    out.cpu_seconds = process_cpu_seconds() - cpu_start;
  }
  out.steps = recorder.steps();
  out.engine_steps = recorder.total_steps();
  out.preemptions = recorder.preemptions();
  out.max_running = recorder.max_running();
  return out;
}

struct StepSummary {
  double mean_sequences = 0, mean_decode = 0, mean_prefill = 0, median_decode_step_ms = 0;
  double busy_seconds = 0;  // sum of step times
};

StepSummary summarize(const std::vector<StepStats>& steps) {
  StepSummary s;
  if (steps.empty()) return s;
  std::vector<double> decode_only;
  for (const StepStats& st : steps) {
    s.mean_sequences += st.sequences;
    s.mean_decode += st.decode_tokens;
    s.mean_prefill += st.prefill_tokens;
    s.busy_seconds += st.seconds;
    if (st.prefill_tokens == 0) decode_only.push_back(st.seconds * 1e3);
  }
  const double n = static_cast<double>(steps.size());
  s.mean_sequences /= n;
  s.mean_decode /= n;
  s.mean_prefill /= n;
  s.median_decode_step_ms = median(decode_only);
  return s;
}

std::string join_argv(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

struct Context {
  Model* model;
  const Tokenizer* tok;
  std::string model_path;
  int threads;
  bool stream_text;
  float temperature;
};

// ---- 1. continuous vs static ----------------------------------------------------------

void section_batching(const Context& cx, const std::vector<RequestSpec>& workload, int max_seqs,
                      int max_batch_tokens, const std::string& kv_memory, int pairs) {
  std::printf(
      "\n## 1. Continuous vs static batching (--max-seqs %d --max-batch-tokens %d "
      "--kv-memory %s, paged)\n\n",
      max_seqs, max_batch_tokens, kv_memory.c_str());
  std::printf(
      "| batching   | wall s | cores | busy %% | output tok/s | total tok/s | TTFT p50 s | TTFT "
      "p99 s "
      "| steps | seqs/step | decode tok/step | decode-only step ms | preempt |\n");
  std::printf(
      "|------------|-------:|------:|-------:|-------------:|------------:|-----------:|----------"
      "-:"
      "|------:|----------:|----------------:|--------------------:|--------:|\n");
  // The VM's speed drifts between seconds: run continuous and static back to back `pairs`
  // times and report the median of the pairs' ratios.
  std::vector<double> ratios;
  for (int pair = 0; pair < pairs; ++pair) {
    double rate[2] = {0, 0};
    for (BatchingMode mode : {BatchingMode::kContinuous, BatchingMode::kStatic}) {
      EngineOptions o;
      o.threads = cx.threads;
      o.max_seqs = max_seqs;
      o.max_batch_tokens = max_batch_tokens;
      o.prefill_chunk = max_batch_tokens;
      o.kv_memory = kv_memory;
      o.batching = mode;
      const RunResult r =
          run_workload(*cx.model, *cx.tok, o, workload, cx.stream_text, cx.temperature, 0);
      const StepSummary s = summarize(r.steps);
      const double tps = r.output_tokens / r.seconds;
      rate[mode == BatchingMode::kStatic] = tps;
      std::printf(
          "| %-10s | %6.1f | %5.2f | %6.1f | %12.1f | %11.1f | %10.2f | %10.2f | %5llu | %9.1f | "
          "%15.1f | "
          "%19.2f | %7llu |\n",
          batching_mode_name(mode), r.seconds, r.cpu_seconds / r.seconds,
          100.0 * s.busy_seconds / r.seconds, tps, (r.output_tokens + r.prompt_tokens) / r.seconds,
          median(r.ttft), percentile(r.ttft, 99), static_cast<unsigned long long>(r.engine_steps),
          s.mean_sequences, s.mean_decode, s.median_decode_step_ms,
          static_cast<unsigned long long>(r.preemptions));
      std::fflush(stdout);
    }
    ratios.push_back(rate[1] > 0 ? rate[0] / rate[1] : 0.0);
  }
  std::string each;
  for (double x : ratios) each += fmt::format("{}{:.2f}x", each.empty() ? "" : ", ", x);
  std::printf(
      "\ncores: CPU seconds received / wall seconds (of %d threads; less means a loaded "
      "machine)\nbusy %%: time inside engine steps (schedule + forward + sampling) over the "
      "wall time\ncontinuous / static output throughput: %.2fx (median of %d back-to-back "
      "pairs: %s; target >= 2x)\n",
      cx.threads, median(ratios), pairs, each.c_str());
}

// ---- 2. KV capacity: paged vs contiguous ----------------------------------------------

void section_capacity(const Context& cx, const std::vector<RequestSpec>& workload,
                      const std::vector<RequestSpec>& unscaled, int context,
                      int contiguous_sequences, int block_size, int observe_steps) {
  const ModelConfig& c = cx.model->config();
  const KvLayout layout = KvLayout::for_model(c, block_size, KvType::kF16);
  const int32_t blocks_per_context = (context + block_size - 1) / block_size;
  const int32_t n_blocks = blocks_per_context * contiguous_sequences;
  const uint64_t budget = static_cast<uint64_t>(n_blocks) * layout.block_bytes();
  std::printf(
      "\n## 2. KV capacity at max context %d: one budget of %s (--kv-memory %llu = %d "
      "blocks of %d tokens, %s each, f16)\n\n",
      context, format_bytes(budget).c_str(), static_cast<unsigned long long>(budget), n_blocks,
      block_size, format_bytes(layout.block_bytes()).c_str());

  // (a) In-process: fill one PagedKvStore with the workload's final lengths (prompt +
  // output, cycling through the requests) until the next one no longer fits.
  std::printf(
      "Computed on a PagedKvStore, each sequence at its final length (prompt + output "
      "of the unscaled workload, cycled):\n\n");
  std::printf(
      "| layout     | sequences held | blocks used | wasted KV per sequence            |\n");
  std::printf(
      "|------------|---------------:|------------:|-----------------------------------|\n");
  int held[2] = {0, 0};
  double paged_waste_blocks = 0;
  for (KvLayoutMode mode : {KvLayoutMode::kPaged, KvLayoutMode::kContiguous}) {
    PagedKvStore store(layout, n_blocks, context, mode);
    int n = 0;
    for (;; ++n) {
      const RequestSpec& r = unscaled[static_cast<size_t>(n) % unscaled.size()];
      const int len = std::min(context, static_cast<int>(r.prompt.size()) + r.max_tokens);
      if (!store.can_reserve(n, len)) break;
      store.reserve(n, len);
    }
    const KvUsage u = store.usage();
    const double waste_positions =
        n ? static_cast<double>(u.reserved_positions - u.used_positions) / n : 0.0;
    const double waste_bytes = n ? static_cast<double>(u.wasted_bytes) / n : 0.0;
    held[mode == KvLayoutMode::kContiguous] = n;
    if (mode == KvLayoutMode::kPaged) paged_waste_blocks = waste_positions / block_size;
    char waste[96];
    std::snprintf(waste, sizeof(waste), "%.1f tokens = %s = %.2f blocks", waste_positions,
                  format_bytes(static_cast<uint64_t>(waste_bytes)).c_str(),
                  waste_positions / block_size);
    std::printf("| %-10s | %14d | %11d | %-33s |\n", kv_layout_mode_name(mode), n, u.used_blocks,
                waste);
  }
  std::printf(
      "\npaged / contiguous sequences: %.2fx (target >= 3x); paged waste per sequence "
      "%.2f blocks (target < 1)\n",
      held[1] ? static_cast<double>(held[0]) / held[1] : 0.0, paged_waste_blocks);

  // (b) Observed: the engine runs the workload with that budget; how many sequences it keeps
  // running at once. Paged admission reserves prompts only, so it admits more and preempts
  // when the sequences grow (recomputed later, nothing lost).
  const int model_context = std::min(context, c.max_context);
  std::printf(
      "\nObserved on the engine (--kv-memory %llu --max-seqs %zu --max-context %d, "
      "continuous; the first %d steps of the workload, then aborted):\n\n",
      static_cast<unsigned long long>(budget), workload.size(), model_context, observe_steps);
  std::printf(
      "| layout     | max running | mean running | started  | tokens generated | mean KV blocks "
      "used | preemptions |\n");
  std::printf(
      "|------------|------------:|-------------:|---------:|-----------------:|---------------"
      "-----:|------------:|\n");
  for (KvLayoutMode mode : {KvLayoutMode::kPaged, KvLayoutMode::kContiguous}) {
    EngineOptions o;
    o.threads = cx.threads;
    o.max_seqs = static_cast<int>(workload.size());
    o.max_context = model_context;
    o.kv_memory = std::to_string(budget);
    o.kv_layout = mode;
    o.kv_block_size = block_size;
    const RunResult r = run_workload(*cx.model, *cx.tok, o, workload, cx.stream_text,
                                     cx.temperature, static_cast<uint64_t>(observe_steps));
    double mean_running = 0, mean_used = 0;
    for (const StepStats& st : r.steps) {
      mean_running += st.running;
      mean_used += static_cast<double>(st.kv_used_blocks) / (st.kv_used_blocks + st.kv_free_blocks);
    }
    if (!r.steps.empty()) {
      mean_running /= static_cast<double>(r.steps.size());
      mean_used /= static_cast<double>(r.steps.size());
    }
    std::printf("| %-10s | %11d | %12.1f | %5d/%-2zu | %16lld | %18.1f%% | %11llu |\n",
                kv_layout_mode_name(mode), r.max_running, mean_running, r.admitted, workload.size(),
                static_cast<long long>(r.generated_tokens), 100.0 * mean_used,
                static_cast<unsigned long long>(r.preemptions));
    std::fflush(stdout);
  }
}

// ---- 3. aggregate decode speed --------------------------------------------------------

struct ForwardRate {
  double tok_s = 0;      // wall clock, median step
  double cpu_tok_s = 0;  // tokens per (process CPU seconds / threads): what `threads` whole
                         // cores would give, spinning included (so an underestimate)
};

// Bare forward passes (no engine): decode steps of n sequences after a short prompt.
ForwardRate forward_decode_rate(Model& model, int threads, int n_seqs, int prompt_len, int steps) {
  ThreadPool pool(threads);
  std::mt19937 rng(7);
  const int vocab = model.config().vocab_size;
  ContiguousKvStore kv(model.config(), n_seqs, prompt_len + steps + 1);
  Batch batch;
  for (int s = 0; s < n_seqs; ++s) {
    for (int p = 0; p < prompt_len; ++p) batch.add(rng() % vocab, s, p, p + 1 == prompt_len);
  }
  model.forward(batch, kv, pool);
  std::vector<double> step_seconds;
  const double cpu_start = process_cpu_seconds();
  for (int step = 0; step < steps; ++step) {
    batch.clear();
    for (int s = 0; s < n_seqs; ++s) batch.add(rng() % vocab, s, prompt_len + step, true);
    const TimePoint t0 = Clock::now();
    model.forward(batch, kv, pool);
    step_seconds.push_back(seconds_between(t0, Clock::now()));
  }
  const double cpu = process_cpu_seconds() - cpu_start;
  return {n_seqs / median(step_seconds), static_cast<double>(n_seqs) * steps * threads / cpu};
}

void section_decode(const Context& cx, const std::vector<int>& batches, int prompt_len, int steps,
                    double bandwidth) {
  const double weight_bytes = static_cast<double>(cx.model->weight_bytes());
  const double flops_per_token = 2.0 * static_cast<double>(cx.model->matmul_parameters());
  std::printf(
      "\n## 3. Aggregate decode speed (prompt %d tokens each, %d decode steps, engine "
      "--max-seqs N)\n\n",
      prompt_len, steps);
  std::printf(
      "| seqs | cores | engine tok/s | step ms p50 | step ms p90 | forward-only tok/s | forward "
      "tok/s per %d CPU-s | engine "
      "overhead | GFLOP/s | %% of BW roofline |\n",
      cx.threads);
  std::printf(
      "|-----:|------:|-------------:|------------:|------------:|-------------------:|------------"
      "-------------:|-------"
      "---------:|--------:|----------------:|\n");
  for (int n : batches) {
    std::mt19937_64 rng(100 + n);
    std::vector<RequestSpec> workload(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> token(3, cx.model->config().vocab_size - 1);
    for (RequestSpec& r : workload) {
      r.prompt.resize(static_cast<size_t>(prompt_len));
      for (int32_t& t : r.prompt) t = token(rng);
      r.max_tokens = steps + 1;
    }
    EngineOptions o;
    o.threads = cx.threads;
    o.max_seqs = n;
    o.max_batch_tokens = std::max(512, n * prompt_len);
    o.prefill_chunk = prompt_len;
    o.kv_memory = "512MiB";
    const RunResult r =
        run_workload(*cx.model, *cx.tok, o, workload, cx.stream_text, cx.temperature, 0);
    // Steps where all n sequences decode together and nothing else runs.
    std::vector<double> step_s;
    for (const StepStats& st : r.steps) {
      if (st.prefill_tokens == 0 && st.decode_tokens == n) step_s.push_back(st.seconds);
    }
    const double step = median(step_s);
    const double engine_rate = step > 0 ? n / step : 0.0;
    const ForwardRate fr = forward_decode_rate(*cx.model, cx.threads, n, prompt_len, steps);
    const double forward_rate = fr.tok_s;
    std::printf(
        "| %4d | %5.2f | %12.1f | %11.2f | %11.2f | %18.1f | %24.1f | %13.1f%% | %7.1f | "
        "%14.1f%% |\n",
        n, r.cpu_seconds / r.seconds, engine_rate, step * 1e3, percentile(step_s, 90) * 1e3,
        forward_rate, fr.cpu_tok_s,
        engine_rate > 0 ? 100.0 * (forward_rate / engine_rate - 1.0) : 0.0,
        engine_rate * flops_per_token / 1e9, 100.0 * (engine_rate / n) * weight_bytes / bandwidth);
    std::fflush(stdout);
  }
  std::printf(
      "\n(roofline: %.1f GB/s read bandwidth / %.1f MiB of weights = %.1f steps/s; a "
      "step's %% is its steps/s against that)\nforward tok/s per %d CPU-s: tokens over the "
      "process CPU time / %d, i.e. what %d whole cores would give (spin-waits included)\n",
      bandwidth / 1e9, weight_bytes / 1048576.0, bandwidth / weight_bytes, cx.threads, cx.threads,
      cx.threads);
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"issue-4 engine benchmark: batching, KV capacity, aggregate decode (in-process)"};
  std::string model_path, sections = "batching,capacity,decode", decode_batches = "1,4,16,32";
  std::string kv_memory = "1GiB";
  WorkloadSpec w;
  bool quick = false, no_text = false;
  int threads = 0, max_seqs = 32, max_batch_tokens = 512, context = 2048, contiguous_seqs = 8;
  int block_size = 16, decode_prompt = 16, decode_steps = 64;
  int observe_steps = 100, batching_pairs = 3;
  float temperature = 0.0f;
  app.add_option("model", model_path, "model file (GGUF, llama2.c, HF folder)")->required();
  app.add_flag("--quick", quick,
               "small workload (16 requests, prompts 16-128, outputs 10-64, 8 seqs, 16 decode "
               "steps): CI-size time");
  app.add_option("--sections", sections, "comma separated: batching,capacity,decode")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (default: physical cores)");
  app.add_option("--requests", w.requests)->capture_default_str();
  app.add_option("--prompt-min", w.prompt_min)->capture_default_str();
  app.add_option("--prompt-max", w.prompt_max)->capture_default_str();
  app.add_option("--output-min", w.output_min)->capture_default_str();
  app.add_option("--output-max", w.output_max)->capture_default_str();
  app.add_option("--seed", w.seed)->capture_default_str();
  app.add_option("--temperature", temperature, "0 = greedy")->capture_default_str();
  app.add_flag("--no-text", no_text, "token ids only (skip detokenization)");
  app.add_option("--max-seqs", max_seqs, "batching section")->capture_default_str();
  app.add_option("--batching-pairs", batching_pairs,
                 "batching section: continuous/static pairs run back to back (median ratio)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--max-batch-tokens", max_batch_tokens)->capture_default_str();
  app.add_option("--kv-memory", kv_memory, "batching section")->capture_default_str();
  app.add_option("--context", context, "capacity section: max context")->capture_default_str();
  app.add_option("--contiguous-seqs", contiguous_seqs,
                 "capacity section: the budget is this many contiguous max-context sequences")
      ->capture_default_str();
  app.add_option("--kv-block-size", block_size)->capture_default_str();
  app.add_option("--observe-steps", observe_steps)->capture_default_str();
  app.add_option("--decode-batches", decode_batches)->capture_default_str();
  app.add_option("--decode-prompt", decode_prompt)->capture_default_str();
  app.add_option("--decode-steps", decode_steps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    // Only the defaults change: explicit options still win.
    auto unset = [&](const char* name) { return app.count(name) == 0; };
    if (unset("--requests")) w.requests = 16;
    if (unset("--prompt-max")) w.prompt_max = 128;
    if (unset("--output-max")) w.output_max = 64;
    if (unset("--max-seqs")) max_seqs = 8;
    if (unset("--decode-steps")) decode_steps = 16;
    if (unset("--observe-steps")) observe_steps = 30;
    if (unset("--batching-pairs")) batching_pairs = 1;
  }
  if (threads <= 0) threads = physical_core_count();
  spdlog::set_level(spdlog::level::warn);

  try {
    auto file = std::make_shared<const ModelFile>(load_model(model_path));
    Model model(file);
    auto tok = Tokenizer::create(file->tokenizer);
    const ModelConfig& c = model.config();
    double bandwidth = 0;
    {
      ThreadPool pool(threads);
      bandwidth = measure_read_bandwidth(pool);
    }
    std::printf("# bench_engine_workload\n\ncommand: %s\n", join_argv(argc, argv).c_str());
    std::printf(
        "model: %s (dim %d, %d layers, %d/%d heads, vocab %d, context %d; %.1f MiB of "
        "weights, %.1f M matrix parameters)\n",
        model_path.c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_context,
        model.weight_bytes() / 1048576.0, model.matmul_parameters() / 1e6);
    std::printf("machine: %d threads, kernels %s, read bandwidth %.1f GB/s\n", threads,
                isa_level_name(active_isa_level()), bandwidth / 1e9);

    // A model whose context cannot hold the longest prompt + output runs a proportionally
    // shorter workload (stories260K: context 512); the capacity computation always uses
    // the unscaled one.
    const int longest = w.prompt_max + w.output_max;
    const double scale = longest < c.max_context ? 1.0 : (c.max_context - 1.0) / longest;
    const auto workload = make_workload(w, c.vocab_size, scale);
    const auto unscaled = make_workload(w, c.vocab_size, 1.0);
    int64_t prompt_sum = 0, output_sum = 0;
    for (const RequestSpec& r : workload) {
      prompt_sum += static_cast<int64_t>(r.prompt.size());
      output_sum += r.max_tokens;
    }
    std::printf(
        "workload: %d requests arriving together, prompts uniform %d-%d, outputs "
        "uniform %d-%d (ignore_eos), seed %llu%s: %lld prompt + %lld output tokens\n",
        w.requests, w.prompt_min, w.prompt_max, w.output_min, w.output_max,
        static_cast<unsigned long long>(w.seed),
        scale < 1.0
            ? fmt::format(" -- scaled by {:.2f} to fit context {}", scale, c.max_context).c_str()
            : "",
        static_cast<long long>(prompt_sum), static_cast<long long>(output_sum));
    std::printf("sampling: %s; %s\n",
                temperature > 0 ? fmt::format("temperature {}", temperature).c_str() : "greedy",
                no_text ? "token ids only" : "detokenized text streamed");
    std::fflush(stdout);  // a long run shows its header (and command) right away

    const Context cx{&model, tok.get(), model_path, threads, !no_text, temperature};
    const std::vector<int> wanted = parse_list(decode_batches);
    if (sections.find("batching") != std::string::npos) {
      section_batching(cx, workload, max_seqs, max_batch_tokens, kv_memory, batching_pairs);
    }
    if (sections.find("capacity") != std::string::npos) {
      section_capacity(cx, workload, unscaled, context, contiguous_seqs, block_size, observe_steps);
    }
    if (sections.find("decode") != std::string::npos) {
      section_decode(cx, wanted, decode_prompt, decode_steps, bandwidth);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_engine_workload: %s\n", e.what());
    return 1;
  }
  return 0;
}
