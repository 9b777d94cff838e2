#include "advise/advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "advise/dynamic_text.h"
#include "advise/prompt_lint.h"
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

// A decode step of `rows` rows against the `step_now` measured at `now_rows`. With a row sweep
// (advise/decode_curve.h): the forward pass grows as the curve does and the rest of the step
// (sampling, bookkeeping: a fixed cost that dominates a tiny model's step) stays. The forward
// part is the share the run's own steps recorded; a state without it takes the sweep's pass
// time, capped at the step. Without a sweep, along the step cost fitted on the run's own
// steps (flat when rows never varied).
double step_with_rows(const EngineState& s, const WorkloadFacts& w, double step_now,
                      double now_rows, double rows) {
  if (!s.decode_curve.empty()) {
    const double forward_now = w.decode_forward_share > 0
                                   ? step_now * w.decode_forward_share
                                   : std::min(step_now, s.decode_curve.at(now_rows));
    return step_now - forward_now + forward_now * s.decode_curve.ratio(now_rows, rows);
  }
  return step_now + w.cost.per_row * (rows - now_rows);
}

// Where step_with_rows took its figures, for the evidence.
std::string step_cost_source(const EngineState& s, const WorkloadFacts& w, double step_now,
                             double now_rows, double rows) {
  if (!s.decode_curve.empty()) {
    return fmt::format(
        "a decode step of {:.0f} rows: {} predicted from {} at {:.1f}, {} of it the forward "
        "pass, which the row sweep (context {}) timed at {} -> {}",
        rows, ms(step_with_rows(s, w, step_now, now_rows, rows)), ms(step_now), now_rows,
        w.decode_forward_share > 0 ? pct(w.decode_forward_share) : std::string("most"),
        s.decode_curve.context, ms(s.decode_curve.at(now_rows)), ms(s.decode_curve.at(rows)));
  }
  return fmt::format(
      "a decode step of {:.0f} rows: {} predicted from {} at {:.1f} (the step cost fitted on "
      "this run: {} + {} a row; no row sweep)",
      rows, ms(step_with_rows(s, w, step_now, now_rows, rows)), ms(step_now), now_rows,
      ms(w.cost.fixed), ms(w.cost.per_row));
}

// Output throughput with `rows` sequences decoding instead of the `now_rows` measured: the
// same prompt work and decode tokens, the decode steps fewer and each costing what a step of
// that many rows costs (step_with_rows).
double throughput_with_rows(const EngineState& s, const WorkloadFacts& w, double now_rows,
                            double rows) {
  const StepKindTotals& d = s.step_totals.decode_only;
  if (now_rows <= 0 || w.output_throughput <= 0 || d.steps == 0) return w.output_throughput;
  const double prompt_work = s.step_totals.prefill_only.seconds + s.step_totals.mixed.seconds;
  const double step_then = step_with_rows(s, w, d.mean_seconds(), now_rows, rows);
  const double decode_then = static_cast<double>(d.decode_tokens) / rows * step_then;
  return w.output_throughput * (prompt_work + d.seconds) / (prompt_work + decode_then);
}

// The cache a core sees (32 MiB when unknown). Weights under twice that stay cached across
// decode steps: they are read at cache speed, the DRAM roofline says nothing about them, and
// a decode step is bound by compute, so a verification row costs about as much as a step.
uint64_t cache_bytes(const EngineState& s) {
  return s.machine.last_level_cache ? s.machine.last_level_cache : 32ull << 20;
}
bool weights_in_cache(const EngineState& s) {
  return s.model.weight_bytes < 2 * cache_bytes(s);
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
                         "distill a student (docs/pruning-distillation.md)";
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
  if (weights_in_cache(s)) {
    f.verdict = fmt::format("the weights ({}) fit the {} cache: decode is not bound by memory",
                            format_bytes(s.model.weight_bytes), format_bytes(cache_bytes(s)));
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

// The prompt lint's rules on the engine's recent prompts; bytes stand for tokens (4 to a
// token), the state carries no tokenizer.
std::optional<LintReport> lint_recent(const EngineState& s) {
  if (s.prompts.size() < 2) return std::nullopt;
  std::vector<nlohmann::json> requests;
  for (const std::string& p : s.prompts) requests.push_back({{"prompt", p}});
  const Encode bytes = [](const std::string& text) {
    return std::vector<int32_t>(text.begin(), text.end());
  };
  return lint_prompts(requests, bytes, std::max(1, s.config.kv_block_size) * 4);
}

// The lint issue seen in the most recent prompts (null: none).
const LintIssue* main_issue(const std::optional<LintReport>& lint) {
  const LintIssue* best = nullptr;
  if (!lint) return best;
  for (const LintIssue& i : lint->issues) {
    if (best == nullptr || i.requests > best->requests) best = &i;
  }
  return best;
}

// What the two differing values are and what kind of difference they make, from the lint
// (which compares whole prompts) or else from the engine's last near miss.
struct Difference {
  std::string kind;  // a LintIssue kind
  std::string value, other_value;
  size_t offset = 0;
  bool known = false;
};

Difference difference_of(const EngineState& s, const LintIssue* issue) {
  Difference d;
  if (issue != nullptr) {
    d.kind = issue->kind;
    d.value = issue->value;
    d.other_value = issue->other_value;
    d.offset = issue->offset;
    d.known = !d.value.empty() || !d.other_value.empty();
    if (d.known) return d;
  }
  if (s.misses.empty()) return d;
  const PrefixMissRecord& m = s.misses.back();
  const DynamicKind kind = classify_difference(m.before, m.prompt_text, m.cached_text);
  if (d.kind.empty()) {
    d.kind = kind == DynamicKind::kKeyOrder     ? "key order"
             : kind == DynamicKind::kWhitespace ? "whitespace/Unicode"
             : kind == DynamicKind::kText       ? "variable text in the middle"
                                                : "dynamic content early";
  }
  const DifferingValues v = m.realigned
                                ? widen_values(m.before, m.prompt_text, m.prompt_value.size(),
                                               m.cached_text, m.cached_value.size())
                                : DifferingValues{difference_token(m.before, m.prompt_text),
                                                  difference_token(m.before, m.cached_text)};
  d.value = v.a;
  d.other_value = v.b;
  d.offset = static_cast<size_t>(m.same_characters);
  d.known = true;
  return d;
}

const char* fix_for(const std::string& kind) {
  if (kind == "key order") return dynamic_kind_fix(DynamicKind::kKeyOrder);
  if (kind == "whitespace/Unicode") return dynamic_kind_fix(DynamicKind::kWhitespace);
  return dynamic_kind_fix(DynamicKind::kIdentifier);
}

// Cached prefixes evicted before they recur: the KV budget, not the prompts. The size that
// keeps them: the most blocks running requests held at once, plus every distinct block that
// recurred (what the ideal cache served from), with a quarter to spare.
void advise_kv_for_prefixes(Finding& f, const EngineState& s, const WorkloadFacts& w, double hit,
                            double shareable) {
  const uint64_t block_bytes =
      static_cast<uint64_t>(s.config.kv_block_size) * s.model.kv_bytes_per_token;
  const uint64_t budget = static_cast<uint64_t>(kv_positions(s)) * s.model.kv_bytes_per_token;
  const uint64_t recurring = s.sharing.recurring_blocks;
  const uint64_t blocks = static_cast<uint64_t>(
      std::ceil((w.peak_used_blocks + static_cast<double>(recurring)) * 1.25));
  const uint64_t needed = std::max<uint64_t>(blocks * block_bytes, budget + block_bytes);
  f.evidence.push_back(fmt::format(
      "{} cached blocks were evicted for new content; keeping the prefixes needs about {}: "
      "{} blocks running requests held at once plus {} distinct blocks that recurred, "
      "{} each, and a quarter to spare",
      s.prefix.evicted_blocks, format_bytes(needed), w.peak_used_blocks, recurring,
      format_bytes(block_bytes)));
  f.id = "prefix-eviction";
  f.fires = true;
  f.verdict = fmt::format(
      "cached prefixes are evicted before they come back: the KV budget ({}) is too small for "
      "the prompts that recur (not dynamic content: an ideal cache would serve {})",
      format_bytes(budget), pct(shareable));
  const bool float_kv = s.config.kv_type == "f16" || s.config.kv_type == "f32";
  const double q8_gain = s.config.kv_type == "f32" ? 128.0 / 34.0 : 64.0 / 34.0;
  const uint64_t mib = (needed + (1u << 20) - 1) >> 20;
  const uint64_t offload_mib =
      std::max<uint64_t>(1, (recurring * block_bytes + (1u << 20) - 1) >> 20);
  if (s.machine.memory_available == 0 || s.machine.memory_available > 2 * needed) {
    f.lever = fmt::format(
        "more KV memory: --kv-memory {}MiB (memory is available); or KV quantization "
        "(--kv-type q8_0: {:.1f}x the positions in the same memory), or an offload tier for "
        "evicted prefixes (--kv-offload-ram {}MiB)",
        mib, q8_gain, offload_mib);
    f.flags = {{"--kv-memory", fmt::format("{}MiB", mib)}};
  } else if (float_kv && static_cast<double>(budget) * q8_gain >= static_cast<double>(needed)) {
    f.lever = fmt::format(
        "KV quantization: --kv-type q8_0 holds {:.1f}x the positions in the same budget; or "
        "--kv-offload-ram {}MiB keeps evicted prefix blocks in compressed RAM",
        q8_gain, offload_mib);
    f.flags = {{"--kv-type", "q8_0"}};
  } else {
    f.lever = fmt::format(
        "an offload tier for evicted prefixes: --kv-offload-ram {}MiB (compressed RAM) or "
        "--kv-offload-dir DIR",
        offload_mib);
    f.flags = {{"--kv-offload-ram", fmt::format("{}MiB", offload_mib)}};
  }
  // The computed part of TTFT falls from (1 - hit) to (1 - shareable) of the prompt.
  const double base = std::min(w.decode_step, w.ttft_mean);
  predict(f, Metric::kTtftMean, w.ttft_mean,
          base + (w.ttft_mean - base) * (1.0 - shareable) / std::max(0.05, 1.0 - hit));
  f.cost =
      "memory: the KV cache grows (or KV quantization: a little accuracy, q8_0 under 0.5 % "
      "perplexity on TinyStories-656K; or offload: a copy back per hit)";
}

Finding prefix_sharing(const EngineState& s, const WorkloadFacts& w,
                       const std::optional<LintReport>& lint) {
  Finding f = question(2, "prefix-cache", "Do requests share a recurring prompt prefix?");
  const double shareable = s.sharing.shareable_fraction();
  f.evidence.push_back(fmt::format(
      "{} of {} prompts start with blocks an earlier prompt had: {} of prompt tokens shareable",
      s.sharing.sharing_prompts, s.sharing.prompts, pct(shareable)));
  const LintIssue* issue = main_issue(lint);
  const double lint_gain = lint ? lint->hit_rate_fixed - lint->hit_rate_now : 0.0;
  if (lint) {
    for (const LintIssue& i : lint->issues) {
      f.evidence.push_back(fmt::format("prompt lint on the last {} prompts: {} in {}: {}",
                                       lint->requests, i.kind, i.requests, i.example));
    }
    if (!lint->issues.empty()) {
      f.evidence.push_back(fmt::format(
          "the lint's replay of those prompts: hit rate {} as they are, {} canonicalised",
          pct(lint->hit_rate_now), pct(lint->hit_rate_fixed)));
    }
  }
  // Prompts that look alike but differ early: the lint saw it in two or more prompts and
  // fixing it would pay, or the cache recorded two or more near misses.
  const bool lint_says = issue != nullptr && issue->requests >= 2 && lint_gain >= 0.1;
  const auto dynamic_content = [&](double hit) {
    const Difference d = difference_of(s, issue);
    f.fires = true;
    f.id = d.kind == "key order" || d.kind == "whitespace/Unicode" ? "canonical-serialization"
                                                                   : "static-content-first";
    if (!s.misses.empty()) {
      std::vector<int> same;
      for (const PrefixMissRecord& m : s.misses) same.push_back(m.same_characters);
      std::sort(same.begin(), same.end());
      f.evidence.push_back(fmt::format(
          "{} recent requests matched a cached prompt for a median {} characters, differed, and "
          "agreed again after it",
          s.misses.size(), same[same.size() / 2]));
    }
    if (d.known) {
      const DynamicKind k = classify_difference("", d.value, "");
      f.evidence.push_back(fmt::format("they differ at `{}` vs `{}`, {} characters in ({})",
                                       show_value(d.value), show_value(d.other_value), d.offset,
                                       d.kind == "dynamic content early" && k != DynamicKind::kText
                                           ? dynamic_kind_name(k)
                                           : d.kind.c_str()));
    }
    if (d.kind == "key order") {
      f.verdict =
          "the prompts look identical but their JSON is serialised in varying key order: "
          "non-deterministic serialization defeats the cache";
    } else if (d.kind == "whitespace/Unicode") {
      f.verdict =
          "the prompts look identical but are spelled differently (whitespace or Unicode "
          "forms): the cache compares tokens, not meaning";
    } else if (d.kind == "variable text in the middle") {
      f.verdict = fmt::format(
          "the prompts look identical but variable text (`{}` vs `{}`) sits before text they "
          "share: everything after it is computed again",
          show_value(d.value, 24), show_value(d.other_value, 24));
    } else {
      const DynamicKind k = classify_difference("", d.value, "");
      f.verdict = fmt::format(
          "the prompts look identical but a{} {} sits early in them: dynamic content placed "
          "before static content",
          k == DynamicKind::kIdentifier ? "n" : "",
          k == DynamicKind::kText ? "value" : dynamic_kind_name(k));
    }
    f.lever = fmt::format("{} (`rapide advise --prompts FILE --fix OUT` rewrites a request log)",
                          fix_for(d.kind));
    if (!s.config.prefix_cache) f.lever += "; then --prefix-cache on";
    f.effect = issue != nullptr
                   ? fmt::format(
                         "prefix-cache hit rate {} -> {} (the prompt lint's replay of the last "
                         "{} prompts with the fix)",
                         pct(s.config.prefix_cache ? hit : lint->hit_rate_now),
                         pct(lint->hit_rate_fixed), lint->requests)
                   : "the prompt lint replays your requests with the fix and estimates the hit "
                     "rate";
    f.cost = "complexity: a change in the client's prompt building; no accuracy cost";
  };
  const auto suspect = [&](const std::string& signal) {
    f.suspected = true;
    f.signal = signal;
    f.lever =
        "confirm on more traffic, or run the prompt lint on a request log (`rapide advise "
        "--prompts FILE`)";
  };

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
    } else if (lint_says) {
      dynamic_content(0.0);
    } else {
      f.verdict = "little sharing: the prefix cache would not help much";
      if (issue != nullptr) {
        suspect(fmt::format("the lint found {} in {} of the last {} prompts", issue->kind,
                            issue->requests, lint->requests));
      }
    }
    return f;
  }
  const double hit = s.prefix.hit_rate();
  f.evidence.push_back(fmt::format("prefix cache hit rate {} of {} prompt tokens", pct(hit),
                                   s.prefix.prompt_tokens));
  // Far below the ideal: the measured sharing an unbounded cache would serve, missed.
  const double gap = shareable - hit;
  const bool far_below = gap >= 0.2 && hit < 0.7 * shareable;
  if (far_below && s.prefix.evicted_blocks > 0) {
    advise_kv_for_prefixes(f, s, w, hit, shareable);
    return f;
  }
  if (hit < 0.5 && (s.misses.size() >= 2 || lint_says)) {
    dynamic_content(hit);
    return f;
  }
  if (far_below) {
    f.fires = true;
    f.id = "prefix-cache-misses";
    f.verdict = fmt::format(
        "the cache serves {} of prompt tokens where an ideal cache would serve {}, with no "
        "eviction and no near miss recorded: prompts with a shared prefix arrive together "
        "(computed side by side before either is cached), or differ in ways the engine cannot "
        "see",
        pct(hit), pct(shareable));
    f.lever =
        "run the prompt lint on a request log (`rapide advise --prompts FILE`); for bursts of "
        "one prefix, send one request first (rapide batch orders prompts by shared prefix)";
    f.cost = "none to look";
    return f;
  }
  f.verdict = fmt::format("prefix caching is on and serves {} of prompt tokens (ideal {})",
                          pct(hit), pct(shareable));
  if (s.misses.size() == 1 && hit < 0.5) {
    const PrefixMissRecord& m = s.misses.back();
    suspect(fmt::format("one near miss: `{}` vs `{}` after {} characters",
                        show_value(m.realigned ? m.prompt_value : m.prompt_text, 24),
                        show_value(m.realigned ? m.cached_value : m.cached_text, 24),
                        m.same_characters));
  } else if (issue != nullptr && issue->requests >= 1 && hit < 0.5) {
    suspect(fmt::format("the lint found {} in {} of the last {} prompts", issue->kind,
                        issue->requests, lint->requests));
  } else if (gap >= 0.1) {
    suspect(fmt::format("the hit rate is {} below the ideal {}{}", pct(gap), pct(shareable),
                        s.prefix.evicted_blocks > 0
                            ? fmt::format(" and {} blocks were evicted", s.prefix.evicted_blocks)
                            : std::string()));
  }
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
// A KV-capacity lever does not fire when a decode step of the rows it would admit is predicted
// to cost more than this share of the per-row cost now (the rows would not get cheaper).
constexpr double kMaxPerRowCostShare = 0.9;

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
    f.evidence.push_back(
        step_cost_source(s, w, s.step_totals.decode_only.mean_seconds(), rows, paged_rows));
    const double after = throughput_with_rows(s, w, rows, paged_rows);
    // More sequences at once pay only where a step of more rows costs less per row; where
    // decode is bound by compute the steps grow with the rows and each token costs the same.
    // (The gate is on the decode cost per row, not on the predicted throughput: the prompt
    // work the prediction keeps fixed would dilute a real gain below any threshold.)
    const double step_now = s.step_totals.decode_only.mean_seconds();
    const double step_then = step_with_rows(s, w, step_now, rows, paged_rows);
    const double per_row_share =
        step_now > 0 && paged_rows > 0 ? (step_then / paged_rows) / (step_now / rows) : 0.0;
    if (per_row_share > kMaxPerRowCostShare) {
      f.fires = false;
      f.verdict += fmt::format(
          "; but a decode step of {:.0f} rows would cost {} of the per-row cost at {:.1f} "
          "({:.0f} -> {:.0f} tok/s predicted): decode steps grow with their rows here (bound by "
          "compute), so the wait is for compute, not memory",
          paged_rows, pct(per_row_share), rows, w.output_throughput, after);
      f.lever.clear();
      f.flags.clear();
      return f;
    }
    predict(f, Metric::kOutputThroughput, w.output_throughput, after);
    f.cost = contiguous ? "none: paged is rapide's default (a block table per sequence)"
                        : "a slightly longer block table; prefix sharing gets finer";
    return f;
  }
  f.verdict = starved ? "sequences wait, but the KV slots they hold are mostly filled"
                      : "no sequence waited for KV memory";
  return f;
}

// ---- 5. Is per-token decode latency the priority? ----
// Speculation pays only where a decode step is bound by reading the weights (verification
// rows then ride along almost free) and the guesses come true: the outputs repeat (prompt
// lookup's hit share on recent outputs, measured with speculation off) or a draft model is
// given.
constexpr double kSpecMinLookupShare = 0.3;  // below, n-gram guesses mostly fail
constexpr int kSpecMinLookupTokens = 32;     // fewer output tokens say nothing
constexpr double kSpecMinGain = 0.1;         // a smaller predicted TPOT gain is noise

Finding speculation(const EngineState& s, const WorkloadFacts& w, const std::string& draft) {
  Finding f = question(5, "speculative", "Is per-token decode latency the priority?");
  f.optional = true;
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
  if (w.lookup_tokens > 0) {
    f.evidence.push_back(fmt::format(
        "recent outputs repeat: prompt lookup would have guessed {} of their last {} tokens",
        pct(w.lookup_share), w.lookup_tokens));
  }
  if (w.decode_rows > 1.5 || !w.latency_target || w.tpot_p50 <= 0) {
    f.verdict = w.decode_rows > 1.5 ? "several sequences share each decode step: batching "
                                      "already uses the spare compute"
                                    : "no latency target";
    return f;
  }
  if (weights_in_cache(s)) {
    f.verdict = fmt::format(
        "the weights ({}) fit the {} cache: a decode step is bound by compute, not by reading "
        "them, so verifying k guesses costs about k steps: speculation cannot pay",
        format_bytes(s.model.weight_bytes), format_bytes(cache_bytes(s)));
    return f;
  }
  const double step1 = w.cost.samples ? w.cost.at(1.0) : w.decode_step;
  const double roofline_share = step1 > 0 ? w.roofline_step / step1 : 0.0;
  if (w.roofline_step > 0 && roofline_share < 0.25) {
    f.verdict = fmt::format(
        "a decode step takes {} where reading the weights takes {} ({} of the roofline): "
        "it is bound by compute, not bandwidth, and verification rows are not free",
        ms(step1), ms(w.roofline_step), pct(roofline_share));
    return f;
  }
  const bool with_draft = !draft_model.empty();
  if (!with_draft &&
      (w.lookup_tokens < kSpecMinLookupTokens || w.lookup_share < kSpecMinLookupShare)) {
    f.verdict = w.lookup_tokens < kSpecMinLookupTokens
                    ? "too few output tokens to tell whether prompt lookup would guess them"
                    : fmt::format(
                          "outputs repeat too little for prompt lookup ({} guessable, {} "
                          "needed) and no draft model is given (--draft-model)",
                          pct(w.lookup_share), pct(kSpecMinLookupShare));
    return f;
  }
  // k guesses verified in one pass cost the step at 1 + k rows; with acceptance a (taken as
  // independent per guess) a step emits (1 - a^(k+1)) / (1 - a) tokens. For prompt lookup a
  // is the hit share measured on recent outputs; a draft model's is only known once it runs
  // (0.5 assumed; --verify measures it).
  const double a = with_draft ? 0.5 : std::min(0.95, w.lookup_share);
  const int k = 4;
  const double tokens = (1.0 - std::pow(a, k + 1)) / (1.0 - a);
  // A step of 1 + k rows by the row sweep when one was measured (its rows are separate
  // sequences, each reading its own KV: an upper bound for guesses that share one) or the
  // step cost fitted on the run; without either, a verification row is taken to cost 10 % of
  // a one-row step (synth100m Q8_0 on 2 Zen 4 cores).
  const double stepk = !s.decode_curve.empty() ? step1 * s.decode_curve.ratio(1.0, 1.0 + k)
                       : w.cost.per_row > 0    ? w.cost.at(1.0 + k)
                                               : step1 * (1.0 + 0.1 * k);
  const double ratio = step1 > 0 ? (stepk / tokens) / step1 : 1.0;
  if (ratio > 1.0 - kSpecMinGain) {
    f.verdict = fmt::format(
        "a step of {} rows costs {:.1f}x a one-row step and would emit {:.2f} tokens: "
        "speculation would not pay",
        1 + k, step1 > 0 ? stepk / step1 : 0.0, tokens);
    return f;
  }
  f.fires = true;
  f.verdict = fmt::format(
      "one sequence at a time, decode bound by reading {} of weights per token ({} of the "
      "roofline): verification rows ride along almost free{}",
      format_bytes(s.model.weight_bytes), pct(roofline_share),
      with_draft ? "" : fmt::format(", and outputs repeat ({} guessable)", pct(w.lookup_share)));
  f.lever = with_draft ? fmt::format("speculative decoding with the draft model {}", draft_model)
                       : "speculative decoding by prompt lookup (n-gram; no draft model needed)";
  f.flags = with_draft
                ? std::vector<std::pair<std::string, std::string>>{{"--spec", "draft"},
                                                                   {"--draft-model", draft_model}}
                : std::vector<std::pair<std::string, std::string>>{{"--spec", "ngram"}};
  predict(f, Metric::kTpotP50, w.tpot_p50, w.tpot_p50 * ratio);
  f.effect +=
      with_draft
          ? fmt::format(" (assuming {} acceptance of {} guesses; --verify measures it)", pct(a), k)
          : fmt::format(" ({} acceptance, the measured lookup share, {} guesses)", pct(a), k);
  f.cost = with_draft ? "memory and compute: the draft model's weights and passes; no accuracy "
                        "cost (greedy output unchanged)"
                      : "a little compute per step; no accuracy cost (greedy output unchanged)";
  return f;
}

// ---- 6. Do prefill and decode contend for the same hardware? ----
Finding contention(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(6, "prefill-chunk", "Do prefill and decode contend for the same hardware?");
  f.optional = true;
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
  // The step cost curve: what a step with prompt work costs beyond a decode step of the same
  // rows, at a chunk of C tokens: overhead + per_token * C.
  PrefillCost pc = fit_prefill_cost(s, w.cost);
  const double decode_step = decode.mean_seconds();
  if (pc.samples == 0) {  // no step of the recent ones had prompt work: the run's totals
    pc.fixed = std::min(w.cost.fixed, mixed.mean_seconds());
    pc.per_token = (mixed.mean_seconds() - decode_step) / chunk_tokens;
  }
  const double overhead = std::max(0.0, pc.fixed - w.cost.fixed);
  const double per_token = std::max(1e-9, pc.per_token);
  f.evidence.push_back(fmt::format(
      "step cost curve on {} steps with prompt work: {} + {:.3f} ms per prompt token{}, vs {} "
      "for a decode step",
      pc.samples, ms(pc.fixed), per_token * 1e3,
      pc.varied ? "" : " (chunk sizes never varied: the fixed part taken as a decode step's)",
      ms(decode_step)));
  if (w.itl_p99 > 0) {
    f.evidence.push_back(fmt::format("inter-token latency p50 {}, p99 {}{}", ms(w.itl_p50),
                                     ms(w.itl_p99),
                                     w.itl_from_steps ? " (from the engine's step times)" : ""));
  }
  f.evidence.push_back(fmt::format(
      "a mixed step carries {:.0f} prompt tokens; streams spent {} of their time stalled",
      chunk_tokens, pct(stall / streaming)));
  // The smallest chunk whose prompt tokens cost as much as the rest of its step (the decode
  // rows riding along and the fixed part): a prompt then takes at most twice its unchunked
  // time to prefill, and a stalled token waits about two decode steps. A power of two, and
  // never below half the smallest chunk measured: the curve is not extrapolated further.
  const double want = (decode_step + overhead) / per_token;
  int chunk = 1;
  while (chunk < want || chunk < pc.smallest / 2) chunk *= 2;
  const double after = w.decode_step_p99 + overhead + per_token * chunk;
  if (chunk < s.config.prefill_chunk && w.itl_p99 > 0 && after <= 0.75 * w.itl_p99) {
    f.fires = true;
    f.verdict =
        fmt::format("streams stall while {}-token prompt chunks run", s.config.prefill_chunk);
    f.lever =
        "smaller prefill chunks; beyond that prefill/decode disaggregation (mpirun -np 2 "
        "rapide-mpi serve --disaggregate)";
    f.flags = {{"--prefill-chunk", std::to_string(chunk)}};
    // A p99 for a p99: the recent decode steps' p99 plus what a chunk of C tokens adds.
    predict(f, Metric::kItlP99, w.itl_p99, after);
    f.cost = fmt::format(
        "TTFT of long prompts rises: a {}-token chunk runs at {} of the prefill throughput of "
        "a {}-token one",
        chunk,
        pct((chunk / pc.at(chunk)) /
            (s.config.prefill_chunk / pc.at(static_cast<double>(s.config.prefill_chunk)))),
        s.config.prefill_chunk);
    return f;
  }
  if (overhead >= decode_step) {
    f.fires = true;
    f.verdict = fmt::format(
        "a step with prompt work costs {} beyond a decode step whatever its chunk (attention "
        "over long contexts, the step's fixed work): smaller chunks cannot shorten the stalls",
        ms(overhead));
    // Named, not applied: it needs a second rank (mpirun), which --verify cannot start.
    f.lever =
        "prefill/decode disaggregation: mpirun -np 2 rapide-mpi serve --disaggregate "
        "(docs/distributed.md)";
    f.cost =
        "a second rank's cores for prefill; KV blocks sent between ranks; long prompts' "
        "TTFT rises (1.1-1.3x measured)";
    return f;
  }
  f.verdict =
      w.itl_p99 > 0
          ? fmt::format(
                "by the step cost curve a {}-token chunk would bring ITL p99 to {} from {}: not "
                "enough to pay for the slower prefill",
                chunk, ms(after), ms(w.itl_p99))
          : "no inter-token latency measured to weigh smaller chunks against";
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
        "tensor or pipeline parallelism across machines: mpirun -np N --hostfile H rapide-mpi "
        "serve --tp N (or --pp N) (docs/distributed.md)";
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

// Requests that wait although KV memory has room for them and the step has token budget
// left wait for a scheduler limit: --max-seqs (sequences running at once) or
// --max-batch-tokens (tokens per forward pass). Counted over the recent steps after which
// requests waited; a step counts when a waiting request's blocks were free.
Finding scheduler_limits(const EngineState& s, const WorkloadFacts& w) {
  Finding f = question(7, "scheduler-limits",
                       "Do requests wait while KV memory and the step's token budget are free?");
  const int bs = std::max(1, s.config.kv_block_size);
  const int seq_blocks =
      std::max(1, static_cast<int>(std::ceil((w.prompt_mean + w.output_mean) / bs)));
  int waited = 0, at_seqs = 0, at_tokens = 0, demand = 0, free_blocks = 0;
  for (const StepRecord& r : s.steps) {
    demand = std::max(demand, r.running + r.waiting);
    if (r.waiting == 0) continue;
    waited++;
    if (r.kv_free_blocks < seq_blocks) continue;  // KV memory is what they wait for
    free_blocks = std::max(free_blocks, r.kv_free_blocks);
    if (r.running >= s.config.max_seqs) {
      at_seqs++;
    } else if (r.prefill_tokens + r.decode_tokens + r.draft_tokens >= s.config.max_batch_tokens) {
      at_tokens++;
    }
  }
  f.evidence.push_back(fmt::format(
      "{} of the last {} steps ended with requests waiting (up to {} running and waiting at "
      "once); requests waited {} on average before their first step",
      waited, s.steps.size(), demand, ms(w.queue_mean)));
  if (waited == 0) {
    f.verdict = "no request waited";
    return f;
  }
  if (s.config.batching == "static") {
    f.verdict = "static batching admits only into an empty engine (question 3)";
    return f;
  }
  f.evidence.push_back(fmt::format(
      "in {} of them {} sequences ran (--max-seqs) and in {} the step used its {}-token budget "
      "(--max-batch-tokens), with up to {} KV blocks free ({} a request needs)",
      at_seqs, s.config.max_seqs, at_tokens, s.config.max_batch_tokens, free_blocks, seq_blocks));
  const int limited = at_seqs + at_tokens;
  // A limit that held back a quarter of the waiting steps, and waits of a decode step or more.
  // Waits that are a quarter of TTFT or more, at a limit in a quarter of the waiting steps.
  const bool long_waits = w.queue_mean >= 0.25 * w.ttft_mean && w.queue_mean >= w.decode_step;
  if (limited < 3 || limited * 4 < waited || !long_waits) {
    f.verdict = limited > 0 ? "requests waited for a scheduler limit only now and then"
                            : "requests waited for KV memory, not for a scheduler limit";
    if (limited >= 3 && w.queue_mean >= 0.1 * w.ttft_mean) {
      f.suspected = true;
      f.signal =
          fmt::format("{} steps held requests back at a scheduler limit with KV free", limited);
      f.lever = "raise --max-seqs / --max-batch-tokens if the waits grow with traffic";
    }
    return f;
  }
  f.fires = true;
  // Sequences that fit the KV budget, at the measured length.
  const int kv_fit = std::max(1, s.config.kv_total_blocks / seq_blocks);
  if (at_seqs >= at_tokens) {
    const int seqs = std::max(s.config.max_seqs + 1, std::min(demand, kv_fit));
    f.verdict = fmt::format(
        "requests wait for --max-seqs {} while KV memory holds {} such sequences: the cap, not "
        "memory, keeps them out",
        s.config.max_seqs, kv_fit);
    f.lever = fmt::format("raise the sequence cap to the measured demand: --max-seqs {}", seqs);
    f.flags = {{"--max-seqs", std::to_string(seqs)}};
    f.cost = fmt::format(
        "each decode step carries up to {} rows: TPOT rises by about {} per row added (the "
        "fitted step cost)",
        seqs, ms(w.cost.per_row));
  } else {
    // Enough for every sequence wanted to decode and one prompt chunk beside them.
    int budget = s.config.max_batch_tokens * 2;
    while (budget < demand + s.config.prefill_chunk) budget *= 2;
    f.verdict =
        fmt::format("requests wait while steps use their whole {}-token budget with KV memory free",
                    s.config.max_batch_tokens);
    f.lever = fmt::format("a larger step budget: --max-batch-tokens {}", budget);
    f.flags = {{"--max-batch-tokens", std::to_string(budget)}};
    f.cost = "longer steps with prompt work: ITL of running streams rises while prompts join";
  }
  // The wait before the first step goes; the rest of TTFT (the prompt's prefill) stays.
  predict(f, Metric::kTtftMean, w.ttft_mean,
          std::max(w.ttft_mean - w.queue_mean, w.ttft_mean * 0.05));
  return f;
}

Finding offline(const EngineState&, const WorkloadFacts& w) {
  Finding f = question(7, "offline-batch", "Does anyone wait for the answer?");
  f.optional = true;
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
  a.configuration = fmt::format(
      "batching {}, prefix cache {}, KV {} {} ({} blocks of {} tokens), speculation {}, "
      "--max-seqs {}, --max-batch-tokens {}, --prefill-chunk {}",
      s.config.batching, s.config.prefix_cache ? "on" : "off", s.config.kv_layout, s.config.kv_type,
      s.config.kv_total_blocks, s.config.kv_block_size,
      s.config.spec.empty() ? "off" : s.config.spec, s.config.max_seqs, s.config.max_batch_tokens,
      s.config.prefill_chunk);
  a.findings.push_back(model_size(s, w));
  a.findings.push_back(prefix_sharing(s, w, lint_recent(s)));
  a.findings.push_back(batching(s, w));
  a.findings.push_back(kv_layout(s, w));
  a.findings.push_back(speculation(s, w, input.draft_model));
  a.findings.push_back(contention(s, w));
  a.findings.push_back(fits_one_machine(s));
  a.findings.push_back(kv_memory(s, w));
  a.findings.push_back(scheduler_limits(s, w));
  a.findings.push_back(offline(s, w));
  // A failure measured past its threshold; else one seen below it (it outranks every
  // optional lever); else an optional lever.
  const auto first = [&a](auto&& pick) {
    for (size_t i = 0; i < a.findings.size(); ++i) {
      if (pick(a.findings[i])) return static_cast<int>(i);
    }
    return -1;
  };
  a.headline = first([](const Finding& f) { return f.fires && !f.optional; });
  if (a.headline < 0) a.headline = first([](const Finding& f) { return f.suspected; });
  if (a.headline < 0) a.headline = first([](const Finding& f) { return f.fires; });
  return a;
}

std::string format_advice(const Advice& advice) {
  std::string out = fmt::format("rapide advise: {}\n\n", advice.subject);
  for (const Finding& f : advice.findings) {
    out += f.question <= 6 ? fmt::format("{}. {}\n", f.question, f.title)
                           : fmt::format("+ {}\n", f.title);
    for (const std::string& e : f.evidence) out += fmt::format("   evidence: {}\n", e);
    out += fmt::format("   verdict:  {}\n", f.verdict);
    if (f.suspected && !f.fires) {
      out += fmt::format("   signal:   {} (below the threshold that names a lever)\n", f.signal);
      if (!f.lever.empty()) out += fmt::format("   check:    {}\n", f.lever);
    }
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
    // What is on and what is off, as it is: nothing-to-change endorses this configuration
    // for this workload, not rapide's defaults.
    return fmt::format("nothing to change: no question found a bottleneck on this workload ({})",
                       advice.configuration);
  }
  const Finding& h = advice.findings[static_cast<size_t>(advice.headline)];
  if (!h.fires) {
    return fmt::format("first, look into it: {} {} - {}", h.title, h.signal, h.lever);
  }
  return fmt::format("first: {}{}", h.lever, h.effect.empty() ? "" : " - " + h.effect);
}

nlohmann::json advice_to_json(const Advice& advice) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : advice.findings) {
    nlohmann::json j = {{"question", f.question}, {"id", f.id},           {"title", f.title},
                        {"evidence", f.evidence}, {"verdict", f.verdict}, {"fires", f.fires},
                        {"optional", f.optional}};
    if (f.suspected) {
      j["suspected"] = true;
      j["signal"] = f.signal;
      if (!f.fires) j["check"] = f.lever;
    }
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
  nlohmann::json out = {{"subject", advice.subject},
                        {"healthy", advice.healthy()},
                        {"configuration", advice.configuration},
                        {"findings", findings},
                        {"summary", headline_text(advice)}};
  if (!advice.healthy()) {
    out["headline"] = advice.findings[advice.headline].id;
    out["headline_fires"] = advice.findings[advice.headline].fires;
  }
  return out;
}

}  // namespace rapide::advise
