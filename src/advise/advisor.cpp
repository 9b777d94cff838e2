#include "advise/advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "advise/dynamic_text.h"
#include "kv/memory_budget.h"

namespace rapide::advise {

namespace {

constexpr double kQ8BytesPerParameter = 34.0 / 32.0;  // Q8_0: 32 int8 + an F16 scale
// The share of the read-bandwidth roofline a bandwidth-bound decode step reaches (measured
// on synthetic F16 models with bench/advisor.sh; the rest is attention, norms, sampling).
constexpr double kDecodeEfficiency = 0.7;

std::string ms(double seconds) {
  return fmt::format("{:.2f} ms", seconds * 1e3);
}
std::string pct(double fraction) {
  return fmt::format("{:.0f} %", fraction * 100.0);
}

std::string weight_type_name(double bytes_per_parameter) {
  if (bytes_per_parameter >= 3.5) return "F32";
  if (bytes_per_parameter >= 1.9) return "F16";
  if (bytes_per_parameter >= 1.0) return "Q8_0";
  if (bytes_per_parameter >= 0.6) return "Q6/Q5";
  return "Q4";
}

std::string describe_prediction(const Prediction& p) {
  const double scale = metric_scale(p.metric);
  return fmt::format("{} {:.2f} -> {:.2f} {}", metric_name(p.metric), p.before * scale,
                     p.after * scale, metric_unit(p.metric));
}

// A finding of question `number` (7: beyond the six) that does not fire yet.
Finding question(int number, const char* id, const char* title) {
  Finding f;
  f.question = number;
  f.id = id;
  f.title = title;
  return f;
}

void predict(Finding& f, Metric metric, double before, double after) {
  f.prediction = Prediction{metric, before, after};
  f.effect = describe_prediction(*f.prediction);
}

// The KV positions the budget holds.
int64_t kv_positions(const EngineState& s) {
  return static_cast<int64_t>(s.config.kv_total_blocks) * s.config.kv_block_size;
}

double mean_kv_fill(const EngineState& s) {
  int64_t reserved = 0, used = 0;
  for (const StepRecord& r : s.steps) {
    reserved += r.kv_reserved_positions;
    used += r.kv_used_positions;
  }
  return reserved ? static_cast<double>(used) / static_cast<double>(reserved) : 1.0;
}

// Output throughput with `rows` sequences decoding instead of the `now_rows` measured: the
// same prompt work and decode tokens, the decode steps fewer and each by the fitted step
// cost (taken as flat when rows never varied: weights dominate).
double throughput_with_rows(const EngineState& s, const WorkloadFacts& w, double now_rows,
                            double rows) {
  const StepKindTotals& d = s.step_totals.decode_only;
  if (now_rows <= 0 || w.output_throughput <= 0 || d.steps == 0) return w.output_throughput;
  const double prompt_work = s.step_totals.prefill_only.seconds + s.step_totals.mixed.seconds;
  const double step_now = d.mean_seconds();
  const double step_then = step_now + w.cost.per_row * (rows - now_rows);
  const double decode_then = static_cast<double>(d.decode_tokens) / rows * step_then;
  return w.output_throughput * (prompt_work + d.seconds) / (prompt_work + decode_then);
}

// ---- 1. Is the model too big for the hardware? ----
Finding model_size(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(1, "quantize", "Is the model too big for the hardware?");
  const double b = s.model.bytes_per_parameter();
  const std::string type = weight_type_name(b);
  f.evidence.push_back(fmt::format(
      "weights {} ({}, {:.2f} bytes per parameter), KV budget {}",
      format_bytes(s.model.weight_bytes), type, b,
      format_bytes(static_cast<uint64_t>(kv_positions(s)) * s.model.kv_bytes_per_token)));
  const uint64_t kv_bytes = static_cast<uint64_t>(kv_positions(s)) * s.model.kv_bytes_per_token;
  if (s.machine.memory_total > 0 &&
      s.model.weight_bytes + kv_bytes > s.machine.memory_total * 9 / 10) {
    f.fires = true;
    f.evidence.push_back(fmt::format("weights + KV = {} of {} memory",
                                     format_bytes(s.model.weight_bytes + kv_bytes),
                                     format_bytes(s.machine.memory_total)));
    f.verdict = "the model leaves too little memory for the KV cache";
    // Below 1.9 bytes per parameter the weights are already quantized: only fewer parameters
    // help. Pruning and distillation change the model, so --verify cannot A/B them by a flag.
    f.lever = b >= 1.9 ? "quantize the weights to Q8_0 (rapide quantize --type q8_0)"
                       : "a smaller model: rapide prune --ffn F --heal-steps N, or rapide "
                         "distill a student (docs/compression.md)";
    f.cost = "accuracy: Q8_0 raises perplexity by well under 1 % (measure with rapide perplexity)";
    return f;
  }
  // A single request already bandwidth-bound: the decode step at one row against the time
  // the weights take to stream from memory.
  const double step1 = w.cost.samples ? w.cost.at(1.0) : w.decode_step;
  if (w.roofline_step <= 0 || step1 <= 0) {
    f.verdict = "no decode steps or no bandwidth measurement: not assessed";
    return f;
  }
  const double fraction = w.roofline_step / step1;
  // Weights that stay in the cache are read at cache speed: the DRAM roofline says nothing.
  const uint64_t cache = s.machine.last_level_cache ? s.machine.last_level_cache : 32ull << 20;
  if (s.model.weight_bytes < 2 * cache) {
    f.verdict = fmt::format("the weights ({}) fit the {} cache: decode is not bound by memory",
                            format_bytes(s.model.weight_bytes), format_bytes(cache));
    return f;
  }
  f.evidence.push_back(fmt::format(
      "decode step at 1 row {} vs {} to read the weights once at {:.1f} GB/s: {} of the "
      "bandwidth roofline",
      ms(step1), ms(w.roofline_step), s.machine.read_bandwidth / 1e9, pct(fraction)));
  if (w.tpot_p50 > 0) f.evidence.push_back(fmt::format("TPOT p50 {}", ms(w.tpot_p50)));
  if (b >= 1.9 && fraction >= 0.25 && w.decode_rows <= 4.0) {
    f.fires = true;
    f.verdict = fmt::format("decode is bound by reading {} weights: every token streams {}", type,
                            format_bytes(s.model.weight_bytes));
    f.lever = "quantize the weights to Q8_0 (rapide quantize --type q8_0), then serve that file";
    f.flags = {{"--quantize", "q8_0"}};
    // Memory time falls with the bytes; the rest of the step (attention, norms, sampling)
    // stays. The weights' share of the step is the roofline time over the share of the
    // roofline rapide's decode kernels reach at best.
    const double tpot = w.tpot_p50 > 0 ? w.tpot_p50 : step1;
    const double weight_share = std::min(1.0, fraction / kDecodeEfficiency);
    predict(f, Metric::kTpotP50, tpot,
            tpot * (1.0 - weight_share * (1.0 - kQ8BytesPerParameter / b)));
    f.cost =
        "accuracy: Q8_0 raises perplexity by well under 1 % (measure with rapide "
        "perplexity); memory falls by half or more";
    return f;
  }
  f.verdict =
      b < 1.9
          ? fmt::format("weights already {}; decode at {} of the roofline", type, pct(fraction))
          : fmt::format("decode at {} of the roofline: weights are not the bound", pct(fraction));
  return f;
}

// ---- 2. Do requests share a recurring prompt prefix? ----
Finding prefix_sharing(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(2, "prefix-cache", "Do requests share a recurring prompt prefix?");
  const double shareable = s.sharing.shareable_fraction();
  f.evidence.push_back(fmt::format(
      "{} of {} prompts start with blocks an earlier prompt had: {} of prompt tokens shareable",
      s.sharing.sharing_prompts, s.sharing.prompts, pct(shareable)));
  if (!s.config.prefix_cache) {
    if (shareable >= 0.2) {
      f.fires = true;
      f.verdict =
          "prompts share prefixes but the prefix cache is off: every prompt is "
          "computed whole";
      f.lever = "turn prefix caching on";
      f.flags = {{"--prefix-cache", "on"}};
      // TTFT is mostly prefill; the shared part of it goes away.
      const double base = std::min(w.decode_step, w.ttft_mean);
      predict(f, Metric::kTtftMean, w.ttft_mean, base + (w.ttft_mean - base) * (1.0 - shareable));
      f.cost = "memory: cached blocks stay in the KV budget until evicted; no accuracy cost";
    } else {
      f.verdict = "little sharing: the prefix cache would not help much";
    }
    return f;
  }
  const double hit = s.prefix.hit_rate();
  f.evidence.push_back(fmt::format("prefix cache hit rate {} of {} prompt tokens", pct(hit),
                                   s.prefix.prompt_tokens));
  // Near misses: prompts equal to a cached one up to a small difference and again after it.
  if (s.misses.size() >= 2 && hit < 0.5) {
    std::vector<int> same;
    for (const PrefixMissRecord& m : s.misses) same.push_back(m.same_characters);
    std::sort(same.begin(), same.end());
    const PrefixMissRecord& m = s.misses.back();
    const DynamicKind kind = classify_difference(m.before, m.prompt_text, m.cached_text);
    f.id = kind == DynamicKind::kKeyOrder ? "canonical-serialization" : "static-content-first";
    f.fires = true;
    f.evidence.push_back(fmt::format(
        "{} recent requests matched a cached prompt for a median {} characters, differed, and "
        "agreed again after it",
        s.misses.size(), same[same.size() / 2]));
    f.evidence.push_back(fmt::format("they diverge at `{}` vs `{}`, {} characters in ({})",
                                     difference_token(m.before, m.prompt_text),
                                     difference_token(m.before, m.cached_text), m.same_characters,
                                     dynamic_kind_name(kind)));
    f.verdict = kind == DynamicKind::kKeyOrder
                    ? "the prompts look identical but their JSON is serialised in varying key "
                      "order: non-deterministic serialization defeats the cache"
                    : fmt::format(
                          "the prompts look identical but a {} sits early in them: "
                          "dynamic content placed before static content",
                          dynamic_kind_name(kind));
    f.lever = fmt::format("{} (`rapide advise --prompts FILE --fix OUT` rewrites a request log)",
                          dynamic_kind_fix(kind));
    f.effect = "the prompt lint replays your requests with the fix and estimates the hit rate";
    f.cost = "complexity: a change in the client's prompt building; no accuracy cost";
    return f;
  }
  f.verdict = fmt::format("prefix caching is on and serves {} of prompt tokens", pct(hit));
  return f;
}

// ---- 3. Do requests arrive together with very different output lengths? ----
Finding batching(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(3, "continuous-batching",
                       "Do requests arrive together with very different output lengths?");
  const StepKindTotals& d = s.step_totals.decode_only;
  const double padding = d.rows ? static_cast<double>(s.step_totals.padding_rows) / d.rows : 0.0;
  f.evidence.push_back(
      fmt::format("up to {} requests at once; output length mean {:.0f} tokens, "
                  "coefficient of variation {:.2f}",
                  s.step_totals.max_running, w.output_mean, w.output_cv));
  if (s.config.batching != "static") {
    f.verdict = "continuous batching is on";
    return f;
  }
  f.evidence.push_back(
      fmt::format("static batching: {} of decode rows computed for requests "
                  "that had already finished",
                  pct(padding)));
  if (s.step_totals.max_running >= 2 && (padding >= 0.1 || w.output_cv >= 0.25)) {
    f.fires = true;
    f.verdict =
        "a static batch runs until its longest request ends: the others' rows are "
        "wasted and new requests wait";
    f.lever = "continuous batching";
    f.flags = {{"--batching", "continuous"}};
    predict(f, Metric::kOutputThroughput, w.output_throughput,
            w.output_throughput / std::max(0.05, 1.0 - padding));
    f.cost = "none: continuous batching is rapide's default";
    return f;
  }
  f.verdict = "static batching, but outputs are alike: little is wasted";
  return f;
}

// ---- 4. Is the KV cache fragmented or over-provisioned? ----
Finding kv_layout(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(4, "paged-kv", "Is the KV cache fragmented or over-provisioned?");
  const double fill = mean_kv_fill(s);
  const int running = s.step_totals.max_running;
  f.evidence.push_back(fmt::format(
      "{} layout, {}-token blocks: sequences fill {} of the KV slots they hold; at most {} "
      "running, up to {} waiting, {} users",
      s.config.kv_layout, s.config.kv_block_size, pct(fill), running, s.step_totals.max_waiting,
      w.users));
  const bool starved = s.step_totals.max_waiting > 0 || s.counters.preemptions > 0;
  const double seq_len = w.prompt_mean + w.output_mean;
  auto fits = [&](double positions_per_seq) {
    const double n = positions_per_seq > 0 ? kv_positions(s) / positions_per_seq : 0.0;
    return std::min({n, static_cast<double>(s.config.max_seqs), static_cast<double>(w.users)});
  };
  if (fill < 0.5 && starved && running < w.users && running < s.config.max_seqs) {
    const bool contiguous = s.config.kv_layout == "contiguous";
    if (contiguous) {
      f.verdict = fmt::format(
          "each sequence reserves the whole context ({} positions) while "
          "using {:.0f}: memory is left but sequences wait",
          s.model.max_context, seq_len);
      f.lever = "PagedAttention: the paged KV layout";
      f.flags = {{"--kv-layout", "paged"}};
    } else if (s.config.kv_block_size > 16) {
      f.id = "kv-block-size";
      f.verdict = fmt::format(
          "{}-token blocks for {:.0f}-token sequences: most of each last "
          "block is empty",
          s.config.kv_block_size, seq_len);
      f.lever = "smaller KV pages";
      f.flags = {{"--kv-block-size", "16"}};
    } else {
      f.verdict = "sequences wait with KV memory left";
      return f;
    }
    f.fires = true;
    const double rows = std::max(1.0, w.decode_rows);
    const double paged_rows = std::max(rows, fits(std::ceil(seq_len / 16.0) * 16.0));
    f.evidence.push_back(fmt::format("with 16-token pages {:.0f} sequences fit instead of {:.1f}",
                                     paged_rows, rows));
    predict(f, Metric::kOutputThroughput, w.output_throughput,
            throughput_with_rows(s, w, rows, paged_rows));
    f.cost = contiguous ? "none: paged is rapide's default (a block table per sequence)"
                        : "a slightly longer block table; prefix sharing gets finer";
    return f;
  }
  f.verdict = starved ? "sequences wait, but the KV slots they hold are mostly filled"
                      : "no sequence waited for KV memory";
  return f;
}

// ---- 5. Is per-token decode latency the priority? ----
Finding speculation(const EngineState& s, const WorkloadFacts& w, const std::string& draft) {
  Finding f = question(5, "speculative", "Is per-token decode latency the priority?");
  const std::string draft_model = draft.empty() ? s.config.draft_model : draft;
  f.evidence.push_back(
      fmt::format("{:.1f} rows per decode step, TPOT p50 {}", w.decode_rows, ms(w.tpot_p50)));
  if (s.spec.enabled) {
    f.evidence.push_back(fmt::format("speculation ({}) on: {} of {} guesses accepted ({})",
                                     s.config.spec, s.spec.accepted, s.spec.proposed,
                                     pct(s.spec.acceptance())));
    f.verdict = "speculative decoding is on";
    return f;
  }
  if (w.decode_rows > 1.5 || !w.latency_target || w.tpot_p50 <= 0) {
    f.verdict = w.decode_rows > 1.5 ? "several sequences share each decode step: batching "
                                      "already uses the spare compute"
                                    : "no latency target";
    return f;
  }
  f.fires = true;
  f.verdict =
      "one sequence at a time: each decode step reads all weights for one token, "
      "leaving compute idle that could verify guesses";
  const bool with_draft = !draft_model.empty();
  f.lever = with_draft ? fmt::format("speculative decoding with the draft model {}", draft_model)
                       : "speculative decoding by prompt lookup (n-gram; no draft model needed)";
  f.flags = with_draft
                ? std::vector<std::pair<std::string, std::string>>{{"--spec", "draft"},
                                                                   {"--draft-model", draft_model}}
                : std::vector<std::pair<std::string, std::string>>{{"--spec", "ngram"}};
  // k guesses verified in one pass cost the step at 1 + k rows; with acceptance a (taken
  // as independent per guess) a step emits (1 - a^(k+1)) / (1 - a) tokens. The acceptance is
  // not known before speculation runs: --verify measures it; the prediction assumes 0.5.
  const double a = 0.5;
  const int k = 4;
  const double tokens = (1.0 - std::pow(a, k + 1)) / (1.0 - a);
  const double step1 = w.cost.samples ? w.cost.at(1.0) : w.decode_step;
  // Without rows that varied, a verification row is taken to cost 10 % of a one-row step
  // (synth100m Q8_0 on 2 Zen 4 cores; the engine's auto mode measures its own).
  const double stepk = w.cost.per_row > 0 ? w.cost.at(1.0 + k) : step1 * (1.0 + 0.1 * k);
  const double ratio = step1 > 0 ? (stepk / tokens) / step1 : 1.0;
  predict(f, Metric::kTpotP50, w.tpot_p50, w.tpot_p50 * ratio);
  f.effect +=
      fmt::format(" (assuming {} acceptance of {} guesses; --verify measures it)", pct(a), k);
  f.cost = with_draft ? "memory and compute: the draft model's weights and passes; no accuracy "
                        "cost (greedy output unchanged)"
                      : "a little compute per step; no accuracy cost (greedy output unchanged)";
  return f;
}

// ---- 6. Do prefill and decode contend for the same hardware? ----
Finding contention(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(6, "prefill-chunk", "Do prefill and decode contend for the same hardware?");
  const StepKindTotals& mixed = s.step_totals.mixed;
  const StepKindTotals& decode = s.step_totals.decode_only;
  f.evidence.push_back(fmt::format(
      "{} steps mixed prompt chunks with decodes (mean {}, max {}) vs {} decode-only (mean {})",
      mixed.steps, ms(mixed.mean_seconds()), ms(mixed.max_seconds), decode.steps,
      ms(decode.mean_seconds())));
  // The stall: what mixed steps took beyond a decode step, as a share of the time streams
  // were served; rare but long stalls count as much as frequent short ones.
  const double stall = mixed.seconds - static_cast<double>(mixed.steps) * decode.mean_seconds();
  const double streaming = mixed.seconds + decode.seconds;
  if (!w.latency_target) {
    f.verdict = "no latency target: a stalled stream delays no one";
    return f;
  }
  if (mixed.steps < 3 || decode.steps == 0 || streaming <= 0 || stall < 0.1 * streaming ||
      mixed.mean_seconds() < 2.0 * decode.mean_seconds()) {
    f.verdict = "prompt work does not stall token streams";
    return f;
  }
  // Short prompts joining a step cost little whatever the chunk: only chunks of many
  // tokens are worth splitting.
  const double chunk_tokens = static_cast<double>(mixed.prefill_tokens) / mixed.steps;
  if (chunk_tokens < 64) {
    f.verdict = fmt::format("prompts join decode steps {:.0f} tokens at a time: short enough",
                            chunk_tokens);
    return f;
  }
  f.fires = true;
  const double per_token =
      std::max(1e-9, (mixed.mean_seconds() - decode.mean_seconds()) / chunk_tokens);
  if (w.itl_p99 > 0) {
    f.evidence.push_back(
        fmt::format("inter-token latency p50 {}, p99 {}", ms(w.itl_p50), ms(w.itl_p99)));
  }
  f.evidence.push_back(
      fmt::format("a mixed step carries {:.0f} prompt tokens at {:.3f} ms each; "
                  "streams spent {} of their time stalled",
                  chunk_tokens, per_token * 1e3, pct(stall / streaming)));
  // A chunk that costs about one decode step bounds a stalled token at ~2 decode steps.
  int chunk = 16;
  while (chunk * 2 <= s.config.prefill_chunk / 2 && per_token * chunk * 2 <= decode.mean_seconds())
    chunk *= 2;
  if (chunk >= s.config.prefill_chunk) {
    f.verdict = "long prompts stall token streams even with small chunks";
    // Named, not applied: it needs a second rank (mpirun), which --verify cannot start.
    f.lever =
        "prefill/decode disaggregation: mpirun -np 2 rapide serve --disaggregate "
        "(docs/distributed.md)";
    f.cost =
        "a second rank's cores for prefill; KV blocks sent between ranks; long prompts' "
        "TTFT rises (1.1-1.3x measured)";
    return f;
  }
  f.verdict = fmt::format("streams stall while {}-token prompt chunks run", s.config.prefill_chunk);
  f.lever =
      "smaller prefill chunks; beyond that prefill/decode disaggregation (mpirun -np 2 "
      "rapide serve --disaggregate)";
  f.flags = {{"--prefill-chunk", std::to_string(chunk)}};
  const double stalled = std::max(w.itl_p99, mixed.mean_seconds());
  predict(f, Metric::kItlP99, stalled,
          std::min(stalled, decode.mean_seconds() + per_token * chunk));
  f.cost = "TTFT of long prompts rises a little (more, smaller steps)";
  return f;
}

// ---- Beyond the six ----
Finding fits_one_machine(const EngineState& s) {
  Finding f = question(7, "parallelism", "Does the model fit one machine?");
  if (s.machine.memory_total > 0 && s.model.weight_bytes > s.machine.memory_total) {
    f.fires = true;
    f.evidence.push_back(fmt::format("weights {} > memory {}", format_bytes(s.model.weight_bytes),
                                     format_bytes(s.machine.memory_total)));
    f.verdict = "the weights do not fit this machine";
    f.lever =
        "tensor or pipeline parallelism across machines: mpirun -np N --hostfile H rapide serve "
        "--tp N (or --pp N) (docs/distributed.md)";
    f.cost = "network: activations cross machines every layer (TP) or stage (PP)";
    return f;
  }
  f.verdict = "the model fits";
  return f;
}

Finding kv_memory(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(7, "kv-memory", "Does KV memory run out?");
  f.evidence.push_back(fmt::format("{} preemptions; the fewest free KV blocks {} of {}",
                                   s.counters.preemptions, s.step_totals.min_free_blocks,
                                   s.config.kv_total_blocks));
  if (s.counters.preemptions == 0) {
    f.verdict = "no request was preempted for KV memory";
    return f;
  }
  f.fires = true;
  const uint64_t budget = static_cast<uint64_t>(kv_positions(s)) * s.model.kv_bytes_per_token;
  f.verdict = fmt::format(
      "the KV budget ({}) ran out: running requests were preempted and "
      "their prompts recomputed",
      format_bytes(budget));
  const double seq_len = w.prompt_mean + w.output_mean;
  const uint64_t needed = static_cast<uint64_t>(
      std::ceil(seq_len * std::max(1, w.users) * 1.25 * s.model.kv_bytes_per_token));
  // q8_0 stores a 32-value block in 34 bytes where f16 needs 64 (f32: 128): the positions the
  // same budget holds grow by that ratio (docs/kv-cache.md).
  const bool float_kv = s.config.kv_type == "f16" || s.config.kv_type == "f32";
  const double q8_gain = s.config.kv_type == "f32" ? 128.0 / 34.0 : 64.0 / 34.0;
  if (s.machine.memory_available > 2 * std::max(needed, budget)) {
    const uint64_t mib = std::max<uint64_t>(needed, 2 * budget) >> 20;
    f.lever = fmt::format(
        "a larger KV budget (memory is available); or KV quantization "
        "(--kv-type q8_0: {:.1f}x the positions in the same memory), or --kv-offload-ram "
        "for evicted prefixes",
        q8_gain);
    f.flags = {{"--kv-memory", fmt::format("{}MiB", std::max<uint64_t>(mib, 1))}};
    predict(f, Metric::kPreemptions, static_cast<double>(s.counters.preemptions), 0.0);
  } else if (float_kv) {
    f.lever = fmt::format(
        "KV quantization: --kv-type q8_0 holds {:.1f}x the positions in the same budget; "
        "--kv-offload-ram keeps evicted prefix blocks in compressed RAM",
        q8_gain);
    f.flags = {{"--kv-type", "q8_0"}};
    if (static_cast<double>(budget) * q8_gain >= static_cast<double>(needed)) {
      predict(f, Metric::kPreemptions, static_cast<double>(s.counters.preemptions), 0.0);
    }
  } else {
    f.lever = "--kv-offload-ram keeps evicted prefix blocks in compressed RAM";
    f.flags = {{"--kv-offload-ram", "1GiB"}};
  }
  f.cost =
      "memory: the KV cache grows; KV quantization costs a little accuracy (q8_0: under "
      "0.5 % perplexity on TinyStories-656K)";
  return f;
}

Finding offline(const EngineState&, const WorkloadFacts& w) {
  Finding f = question(7, "offline-batch", "Does anyone wait for the answer?");
  if (w.from_bench && w.all_at_once && !w.latency_target) {
    f.fires = true;
    f.evidence.push_back(
        fmt::format("all {} requests arrived at once, no latency target", w.requests));
    f.verdict = "an offline workload: only throughput matters";
    f.lever =
        "rapide batch (a JSONL file in, results out: resumable, prompts ordered by "
        "shared prefix)";
    f.cost = "none: no server to run";
    return f;
  }
  f.verdict = "requests arrive over time: someone waits";
  return f;
}

}  // namespace

const char* metric_name(Metric metric) {
  switch (metric) {
    case Metric::kTpotP50:
      return "TPOT p50";
    case Metric::kTtftMean:
      return "TTFT mean";
    case Metric::kItlP99:
      return "ITL p99";
    case Metric::kOutputThroughput:
      return "output throughput";
    case Metric::kPreemptions:
      return "preemptions";
  }
  return "?";
}

const char* metric_unit(Metric metric) {
  switch (metric) {
    case Metric::kOutputThroughput:
      return "tok/s";
    case Metric::kPreemptions:
      return "";
    default:
      return "ms";
  }
}

double metric_scale(Metric metric) {
  return metric == Metric::kOutputThroughput || metric == Metric::kPreemptions ? 1.0 : 1e3;
}

bool higher_is_better(Metric metric) {
  return metric == Metric::kOutputThroughput;
}

Advice advise(const AdviseInput& input) {
  const EngineState& s = *input.state;
  const WorkloadFacts w = workload_facts(s, input.run);
  Advice a;
  a.subject =
      fmt::format("{}: {} weights ({}), {} cores, {} memory, {:.1f} GB/s read",
                  s.model.name.empty() ? "model" : s.model.name, format_bytes(s.model.weight_bytes),
                  weight_type_name(s.model.bytes_per_parameter()), s.machine.cores,
                  format_bytes(s.machine.memory_total), s.machine.read_bandwidth / 1e9);
  a.findings.push_back(model_size(s, w));
  a.findings.push_back(prefix_sharing(s, w));
  a.findings.push_back(batching(s, w));
  a.findings.push_back(kv_layout(s, w));
  a.findings.push_back(speculation(s, w, input.draft_model));
  a.findings.push_back(contention(s, w));
  a.findings.push_back(fits_one_machine(s));
  a.findings.push_back(kv_memory(s, w));
  a.findings.push_back(offline(s, w));
  for (size_t i = 0; i < a.findings.size(); ++i) {
    if (a.findings[i].fires) {
      a.headline = static_cast<int>(i);
      break;
    }
  }
  return a;
}

std::string format_advice(const Advice& advice) {
  std::string out = fmt::format("rapide advise: {}\n\n", advice.subject);
  for (const Finding& f : advice.findings) {
    out += f.question <= 6 ? fmt::format("{}. {}\n", f.question, f.title)
                           : fmt::format("+ {}\n", f.title);
    for (const std::string& e : f.evidence) out += fmt::format("   evidence: {}\n", e);
    out += fmt::format("   verdict:  {}\n", f.verdict);
    if (f.fires) {
      out += fmt::format("   lever:    {}{}\n", f.lever,
                         f.available ? "" : " [not available in rapide yet]");
      if (!f.flags.empty()) out += fmt::format("   change:   {}\n", change_text(f));
      if (!f.effect.empty()) out += fmt::format("   expected: {}\n", f.effect);
      if (!f.cost.empty()) out += fmt::format("   cost:     {}\n", f.cost);
    }
    out += '\n';
  }
  return out + "=> " + headline_text(advice) + "\n";
}

std::string change_text(const Finding& finding) {
  std::string out;
  for (const auto& [flag, value] : finding.flags) {
    if (!out.empty()) out += ' ';
    out +=
        flag == "--quantize"
            ? fmt::format("rapide quantize MODEL MODEL-{0}.gguf --type {0}, then -m MODEL-{0}.gguf",
                          value)
            : flag + " " + value;
  }
  return out;
}

std::string headline_text(const Advice& advice) {
  if (advice.healthy()) {
    return "nothing to change: continuous batching and prefix caching are on, and no question "
           "found a bottleneck";
  }
  const Finding& h = advice.findings[static_cast<size_t>(advice.headline)];
  return fmt::format("first: {}{}", h.lever, h.effect.empty() ? "" : " - " + h.effect);
}

nlohmann::json advice_to_json(const Advice& advice) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : advice.findings) {
    nlohmann::json j = {{"question", f.question}, {"id", f.id},           {"title", f.title},
                        {"evidence", f.evidence}, {"verdict", f.verdict}, {"fires", f.fires}};
    if (f.fires) {
      j["lever"] = f.lever;
      j["available"] = f.available;
      nlohmann::json flags = nlohmann::json::array();
      for (const auto& [flag, value] : f.flags) flags.push_back({flag, value});
      j["flags"] = flags;
      j["cost"] = f.cost;
      if (f.prediction) {
        j["prediction"] = {{"metric", metric_name(f.prediction->metric)},
                           {"unit", metric_unit(f.prediction->metric)},
                           {"before", f.prediction->before * metric_scale(f.prediction->metric)},
                           {"after", f.prediction->after * metric_scale(f.prediction->metric)}};
      }
      if (!f.effect.empty()) j["effect"] = f.effect;
    }
    findings.push_back(j);
  }
  nlohmann::json out = {
      {"subject", advice.subject}, {"healthy", advice.healthy()}, {"findings", findings}};
  if (!advice.healthy()) out["headline"] = advice.findings[advice.headline].id;
  return out;
}

}  // namespace rapide::advise
