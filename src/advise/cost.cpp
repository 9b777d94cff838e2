#include "advise/cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kv/memory_budget.h"
#include "loadgen/slo.h"

namespace rapide::advise {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

uint64_t kv_budget_bytes(const EngineState& s) {
  return static_cast<uint64_t>(s.config.kv_total_blocks) *
         static_cast<uint64_t>(s.config.kv_block_size) * s.model.kv_bytes_per_token;
}

// The RAM offload tier's size ("" or "0": none); a fraction is of the memory available.
uint64_t offload_bytes(const std::string& text, uint64_t memory_available) {
  if (text.empty() || text == "0") return 0;
  return parse_memory_budget(text, memory_available);
}

// Bytes per weight parameter of a quantization type (as ModelFacts::bytes_per_parameter).
double bytes_per_parameter(const std::string& type) {
  if (type == "f32") return 4.0;
  if (type == "f16" || type == "bf16") return 2.0;
  if (type == "q8_0") return 34.0 / 32.0;
  if (type == "q4_0") return 18.0 / 32.0;
  return 0.0;
}

// The lever's flags as typed ("--kv-memory 4MiB"); change_text spells --quantize as a
// command, too long for a table.
std::string flags_text(const Finding& f) {
  std::string out;
  for (const auto& [flag, value] : f.flags) out += (out.empty() ? "" : " ") + flag + " " + value;
  return out;
}

std::optional<double> per_million(double usd, double tokens) {
  if (tokens <= 0.0) return std::nullopt;
  return usd / tokens * 1e6;
}

std::optional<double> difference(const std::optional<double>& before,
                                 const std::optional<double>& after) {
  if (!before || !after) return std::nullopt;
  return *before - *after;
}

std::string usd(const std::optional<double>& v) {
  if (!v) return "-";
  const double a = std::fabs(*v);
  const int digits = a >= 100 ? 0 : a >= 1 ? 2 : a >= 0.01 ? 4 : 6;
  return fmt::format("${:.{}f}", *v, digits);
}

std::string signed_usd(const std::optional<double>& v) {
  if (!v) return "not predicted";
  return (*v >= 0 ? "+" : "-") + usd(std::fabs(*v));
}

std::string signed_bytes(int64_t bytes) {
  if (bytes == 0) return "0";
  return (bytes > 0 ? "+" : "-") + format_bytes(static_cast<uint64_t>(std::llabs(bytes)));
}

std::string quality_text(const LeverCost& c) {
  if (!c.numerics) return "none (numerics unchanged)";
  if (!c.perplexity) return "not measured (give --text FILE)";
  const Perplexity& p = *c.perplexity;
  return fmt::format("perplexity {:.3f} -> {:.3f} ({:+.2f} %)", p.before, p.after,
                     (p.after / p.before - 1.0) * 100.0);
}

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

Footprint footprint_of(const EngineState& state) {
  Footprint f;
  f.cores = state.machine.threads > 0 ? state.machine.threads : state.machine.cores;
  f.memory_bytes = state.model.weight_bytes + kv_budget_bytes(state) +
                   offload_bytes(state.config.kv_offload_ram, state.machine.memory_available);
  return f;
}

double hourly_usd(const Price& price, const Footprint& footprint) {
  return price.per_hour + footprint.cores * price.per_core_hour +
         static_cast<double>(footprint.memory_bytes) / kGiB * price.per_gib_hour;
}

std::string describe_price(const Price& price, const Footprint& footprint) {
  std::vector<std::string> parts;
  if (price.per_hour > 0) parts.push_back(fmt::format("${:g}/h", price.per_hour));
  if (price.per_core_hour > 0) {
    parts.push_back(fmt::format("{:g} cores x ${:g}/h", footprint.cores, price.per_core_hour));
  }
  if (price.per_gib_hour > 0) {
    parts.push_back(fmt::format("{:.3f} GiB x ${:g}/h",
                                static_cast<double>(footprint.memory_bytes) / kGiB,
                                price.per_gib_hour));
  }
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : " + ") + p;
  if (parts.size() > 1 || price.needs_footprint()) {
    text += fmt::format(" = ${:.4f}/h", hourly_usd(price, footprint));
  }
  return text;
}

std::optional<double> prefill_share(const StepTotals& t) {
  const double prefill_only = t.prefill_only.seconds, decode_only = t.decode_only.seconds;
  const double mixed = t.mixed.seconds;
  const double total = prefill_only + decode_only + mixed;
  if (total <= 0.0) return std::nullopt;
  double mixed_prefill = 0.0;
  if (mixed > 0.0) {
    const double p_tokens = static_cast<double>(t.mixed.prefill_tokens);
    const double d_tokens = static_cast<double>(t.mixed.decode_tokens);
    // Per-token prices from the pure steps: a prompt token costs far less than a decode step.
    double p_price = 1.0, d_price = 1.0;
    if (t.prefill_only.prefill_tokens > 0 && t.decode_only.decode_tokens > 0) {
      p_price = prefill_only / static_cast<double>(t.prefill_only.prefill_tokens);
      d_price = decode_only / static_cast<double>(t.decode_only.decode_tokens);
    }
    const double weight = p_tokens * p_price + d_tokens * d_price;
    mixed_prefill = weight > 0.0 ? mixed * p_tokens * p_price / weight : 0.0;
  }
  return (prefill_only + mixed_prefill) / total;
}

StepTotals step_totals_between(const StepTotals& before, const StepTotals& after) {
  const auto minus = [](const StepKindTotals& a, const StepKindTotals& b) {
    StepKindTotals d;
    d.steps = b.steps - a.steps;
    d.rows = b.rows - a.rows;
    d.prefill_tokens = b.prefill_tokens - a.prefill_tokens;
    d.decode_tokens = b.decode_tokens - a.decode_tokens;
    d.seconds = b.seconds - a.seconds;
    d.max_seconds = b.max_seconds;
    return d;
  };
  StepTotals d = after;
  d.decode_only = minus(before.decode_only, after.decode_only);
  d.prefill_only = minus(before.prefill_only, after.prefill_only);
  d.mixed = minus(before.mixed, after.mixed);
  return d;
}

RunVolume run_volume(const loadgen::RunResult& run, const StepTotals* totals) {
  RunVolume v;
  const loadgen::RunSummary& s = run.summary;
  v.seconds = s.duration;
  v.input_tokens = static_cast<double>(s.prompt_tokens);
  v.output_tokens = static_cast<double>(s.output_tokens);
  v.completed_requests = s.completed;
  double ttft = 0.0, e2e = 0.0;
  for (const loadgen::RequestRecord& r : run.records) {
    if (!r.ok()) continue;
    if (loadgen::meets_slo(r, s.slo)) {
      v.good_output_tokens += r.output_tokens;
      ++v.good_requests;
    }
    if (r.ttft() >= 0.0) ttft += r.ttft();
    e2e += r.end_time;
  }
  const std::optional<double> share = totals ? prefill_share(*totals) : std::nullopt;
  if (share) {
    v.prefill_share = *share;
    v.share_source = "engine step time";
  } else {
    v.prefill_share = e2e > 0.0 ? std::clamp(ttft / e2e, 0.0, 1.0) : 0.0;
    v.share_source = "time to first token";
  }
  return v;
}

TokenCost token_cost(double usd_per_hour, const RunVolume& v) {
  TokenCost c;
  c.usd_per_hour = usd_per_hour;
  const double run_usd = usd_per_hour * v.seconds / 3600.0;
  c.input = per_million(run_usd * v.prefill_share, v.input_tokens);
  c.output = per_million(run_usd * (1.0 - v.prefill_share), v.output_tokens);
  c.output_at_slo = per_million(run_usd, v.good_output_tokens);
  c.total = per_million(run_usd, v.input_tokens + v.output_tokens);
  return c;
}

bool changes_numerics(const Finding& f) {
  for (const auto& [flag, value] : f.flags) {
    if (flag == "--quantize" || flag == "--kv-type" || flag == "--prune" || flag == "--compress") {
      return true;
    }
  }
  return false;
}

int64_t lever_memory_delta(const Finding& f, const EngineState& s) {
  int64_t delta = 0;
  for (const auto& [flag, value] : f.flags) {
    if (flag == "--quantize") {
      const double now = s.model.bytes_per_parameter(), then = bytes_per_parameter(value);
      if (now > 0.0 && then > 0.0) {
        delta += static_cast<int64_t>(
            std::llround(static_cast<double>(s.model.parameters) * (then - now)));
      }
    } else if (flag == "--kv-memory") {
      delta += static_cast<int64_t>(parse_memory_budget(value, s.machine.memory_available)) -
               static_cast<int64_t>(kv_budget_bytes(s));
    } else if (flag == "--kv-offload-ram") {
      delta +=
          static_cast<int64_t>(offload_bytes(value, s.machine.memory_available)) -
          static_cast<int64_t>(offload_bytes(s.config.kv_offload_ram, s.machine.memory_available));
    }
    // --kv-type keeps the budget's bytes (it holds more positions); the scheduler levers,
    // the prefix cache, batching and speculation by prompt lookup work inside it.
  }
  return delta;
}

LeverCost predict_lever_cost(const Finding& f, const EngineState& state, const Price& price,
                             const RunVolume& baseline) {
  LeverCost c;
  c.lever = f.id;
  c.change = flags_text(f);
  c.numerics = changes_numerics(f);
  c.memory_delta = lever_memory_delta(f, state);
  const Footprint before_fp = footprint_of(state);
  Footprint after_fp = before_fp;
  after_fp.memory_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, static_cast<int64_t>(before_fp.memory_bytes) + c.memory_delta));
  const TokenCost before = token_cost(hourly_usd(price, before_fp), baseline);
  c.usd_per_hour_after = hourly_usd(price, after_fp);
  // The price moves with the memory; the predicted metric moves the time the tokens take.
  const double price_ratio =
      before.usd_per_hour > 0.0 ? c.usd_per_hour_after / before.usd_per_hour : 1.0;
  double input_time = 1.0, output_time = 1.0;
  bool predicted = true;
  const bool latency_only = f.prediction && (f.prediction->metric == Metric::kItlP99 ||
                                             f.prediction->metric == Metric::kPreemptions);
  if (!latency_only &&
      (!f.prediction || f.prediction->before <= 0.0 || f.prediction->after <= 0.0)) {
    predicted = false;
    c.note = "no prediction";
  } else {
    const Prediction& p = *f.prediction;
    switch (p.metric) {
      case Metric::kTpotP50:
        output_time = p.after / p.before;
        break;
      case Metric::kTtftMean:
        input_time = p.after / p.before;
        break;
      case Metric::kOutputThroughput:
        input_time = output_time = p.before / p.after;
        break;
      case Metric::kItlP99:
      case Metric::kPreemptions:
        predicted = false;
        c.note = fmt::format("predicted on {} only: no throughput change to price",
                             metric_name(p.metric));
        break;
    }
  }
  const auto scale = [](const std::optional<double>& v, double k) -> std::optional<double> {
    if (!v) return std::nullopt;
    return *v * k;
  };
  c.after.usd_per_hour = c.usd_per_hour_after;
  c.after.input = scale(before.input, price_ratio * input_time);
  c.after.output = scale(before.output, price_ratio * output_time);
  // At the SLO and in total the machine's whole time counts: both parts, weighted by share.
  const double whole_time =
      baseline.prefill_share * input_time + (1.0 - baseline.prefill_share) * output_time;
  c.after.output_at_slo = scale(before.output_at_slo, price_ratio * whole_time);
  c.after.total = scale(before.total, price_ratio * whole_time);
  if (predicted || c.memory_delta != 0) {
    c.saving_input = difference(before.input, c.after.input);
    c.saving_output = difference(before.output, c.after.output);
    // The same requests are taken to meet the SLO afterwards (a faster engine misses it no
    // more often): the saving at the SLO is the whole time's.
    c.saving_at_slo = difference(before.output_at_slo, c.after.output_at_slo);
  }
  if (!predicted && c.memory_delta != 0 && c.note.empty()) c.note = "memory only";
  return c;
}

LeverCost measured_lever_cost(const Finding& f, const EngineState& state_a,
                              const RunVolume& volume_a, const EngineState& state_b,
                              const RunVolume& volume_b, const Price& price) {
  LeverCost c;
  c.lever = f.id;
  c.change = flags_text(f);
  c.numerics = changes_numerics(f);
  c.measured = true;
  const Footprint fa = footprint_of(state_a), fb = footprint_of(state_b);
  c.memory_delta = static_cast<int64_t>(fb.memory_bytes) - static_cast<int64_t>(fa.memory_bytes);
  const TokenCost before = token_cost(hourly_usd(price, fa), volume_a);
  c.usd_per_hour_after = hourly_usd(price, fb);
  c.after = token_cost(c.usd_per_hour_after, volume_b);
  c.saving_input = difference(before.input, c.after.input);
  c.saving_output = difference(before.output, c.after.output);
  c.saving_at_slo = difference(before.output_at_slo, c.after.output_at_slo);
  return c;
}

CostReport price_advice(const Advice& advice, const EngineState& state, const RunVolume& volume,
                        const Price& price) {
  CostReport r;
  r.price = price;
  r.footprint = footprint_of(state);
  r.volume = volume;
  r.cost = token_cost(hourly_usd(price, r.footprint), volume);
  for (const Finding& f : advice.findings) {
    if (!f.fires || f.flags.empty()) continue;
    r.levers.push_back(predict_lever_cost(f, state, price, volume));
  }
  return r;
}

std::string format_token_cost(const TokenCost& c, const RunVolume& v) {
  return fmt::format(
      "{} / M input tokens, {} / M output tokens ({:.0f} % of the time on prompts, by {}); "
      "{} / M output tokens at the SLO ({} of {} requests met it); {} / M tokens in all",
      usd(c.input), usd(c.output), v.prefill_share * 100.0, v.share_source, usd(c.output_at_slo),
      v.good_requests, v.completed_requests, usd(c.total));
}

std::string format_cost_report(const CostReport& r) {
  std::string out = fmt::format("cost at {}:\n  {}\n", describe_price(r.price, r.footprint),
                                format_token_cost(r.cost, r.volume));
  if (r.levers.empty()) return out;
  out += fmt::format("  {:<31} {:<24} {:>14} {:>14} {:>14} {:>12}  {}\n", "lever", "change",
                     "saving/M in", "saving/M out", "saving at SLO", "memory", "quality");
  for (const LeverCost& c : r.levers) {
    out += fmt::format("  {:<31} {:<24} {:>14} {:>14} {:>14} {:>12}  {}{}\n",
                       c.lever + (c.measured ? " (measured)" : ""), c.change,
                       signed_usd(c.saving_input), signed_usd(c.saving_output),
                       signed_usd(c.saving_at_slo), signed_bytes(c.memory_delta), quality_text(c),
                       c.note.empty() ? "" : "; " + c.note);
  }
  return out;
}

nlohmann::json token_cost_to_json(const TokenCost& c) {
  return {{"usd_per_hour", c.usd_per_hour},
          {"usd_per_million_input", optional_json(c.input)},
          {"usd_per_million_output", optional_json(c.output)},
          {"usd_per_million_output_at_slo", optional_json(c.output_at_slo)},
          {"usd_per_million_total", optional_json(c.total)}};
}

nlohmann::json cost_report_to_json(const CostReport& r) {
  nlohmann::json levers = nlohmann::json::array();
  for (const LeverCost& c : r.levers) {
    nlohmann::json quality = c.numerics ? "not measured" : "unchanged";
    if (c.perplexity) {
      quality = {{"perplexity_before", c.perplexity->before},
                 {"perplexity_after", c.perplexity->after}};
    }
    levers.push_back({{"lever", c.lever},
                      {"change", c.change},
                      {"measured", c.measured},
                      {"memory_delta_bytes", c.memory_delta},
                      {"after", token_cost_to_json(c.after)},
                      {"saving_per_million_input", optional_json(c.saving_input)},
                      {"saving_per_million_output", optional_json(c.saving_output)},
                      {"saving_per_million_output_at_slo", optional_json(c.saving_at_slo)},
                      {"changes_numerics", c.numerics},
                      {"quality", quality},
                      {"note", c.note}});
  }
  return {{"price",
           {{"per_hour", r.price.per_hour},
            {"per_core_hour", r.price.per_core_hour},
            {"per_gib_hour", r.price.per_gib_hour},
            {"cores", r.footprint.cores},
            {"memory_bytes", r.footprint.memory_bytes},
            {"usd_per_hour", r.cost.usd_per_hour}}},
          {"prefill_share", r.volume.prefill_share},
          {"prefill_share_source", r.volume.share_source},
          {"cost", token_cost_to_json(r.cost)},
          {"levers", levers}};
}

}  // namespace rapide::advise
