// The money arithmetic (advise/cost.h). Every expected value is computed by hand in the
// comment above it, from the rules in cost.h, not by running the code.
#include "advise/cost.h"

#include <gtest/gtest.h>

namespace rapide::advise {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// 2 threads; 1 GiB of weights (5e8 F16 parameters would be 1e9 bytes: the parameter count is
// set apart below); KV: 1024 blocks x 16 positions x 65536 bytes = 1 GiB.
EngineState state() {
  EngineState s;
  s.machine.threads = 2;
  s.machine.cores = 8;
  s.machine.memory_available = 64ull << 30;
  s.model.weight_bytes = 1ull << 30;
  s.model.parameters = (1ull << 30) / 2;  // F16: 2 bytes per parameter
  s.model.kv_bytes_per_token = 65536;
  s.config.kv_total_blocks = 1024;
  s.config.kv_block_size = 16;
  s.config.kv_type = "f16";
  return s;
}

// 100 s; 50,000 prompt and 10,000 output tokens, 5,000 of them in requests meeting the SLO;
// 20 % of the time on prompts.
RunVolume volume() {
  RunVolume v;
  v.seconds = 100;
  v.input_tokens = 50000;
  v.output_tokens = 10000;
  v.good_output_tokens = 5000;
  v.good_requests = 5;
  v.completed_requests = 10;
  v.prefill_share = 0.2;
  v.share_source = "engine step time";
  return v;
}

TEST(Cost, HourlyPriceAddsTheFlatCoreAndMemoryParts) {
  // 0.10 + 2 x 0.03 + 3 x 0.005 = 0.175
  const Price price{0.10, 0.03, 0.005};
  EXPECT_NEAR(hourly_usd(price, Footprint{2, 3ull << 30}), 0.175, 1e-12);
  // Only the flat part: the footprint does not matter.
  EXPECT_NEAR(hourly_usd(Price{1.5, 0, 0}, Footprint{64, 1ull << 40}), 1.5, 1e-12);
}

TEST(Cost, FootprintIsThreadsAndWeightsPlusKvPlusOffload) {
  EngineState s = state();
  // 1 GiB weights + 1 GiB KV
  EXPECT_EQ(footprint_of(s).memory_bytes, 2ull << 30);
  EXPECT_EQ(footprint_of(s).cores, 2.0);
  s.config.kv_offload_ram = "512MiB";  // + 0.5 GiB
  EXPECT_EQ(footprint_of(s).memory_bytes, (2ull << 30) + (512ull << 20));
}

TEST(Cost, TokenCostSplitsTheRunByThePrefillShare) {
  // $3.60/h = $0.001/s; 100 s cost $0.10.
  const TokenCost c = token_cost(3.6, volume());
  // input: 0.10 x 0.2 / 50,000 x 1e6 = 0.40
  EXPECT_NEAR(*c.input, 0.40, 1e-9);
  // output: 0.10 x 0.8 / 10,000 x 1e6 = 8.00
  EXPECT_NEAR(*c.output, 8.00, 1e-9);
  // at the SLO: 0.10 / 5,000 x 1e6 = 20.00
  EXPECT_NEAR(*c.output_at_slo, 20.00, 1e-9);
  // in all: 0.10 / 60,000 x 1e6 = 1.666...
  EXPECT_NEAR(*c.total, 0.10 / 60000 * 1e6, 1e-9);
  // No request met the SLO: no good token to divide by, so no figure (not infinity, not 0).
  RunVolume none = volume();
  none.good_output_tokens = 0;
  EXPECT_FALSE(token_cost(3.6, none).output_at_slo.has_value());
}

TEST(Cost, PrefillShareSplitsMixedStepsAtThePureStepsPerTokenPrices) {
  StepTotals t;
  t.prefill_only = {10, 10, 1000, 0, 2.0, 0.3};  // 2 s for 1000 prompt tokens: 0.002 s each
  t.decode_only = {100, 100, 0, 100, 5.0, 0.1};  // 5 s for 100 decodes: 0.05 s each
  t.mixed = {5, 10, 500, 20, 3.0, 0.7};          // 500 x 0.002 = 1.0 vs 20 x 0.05 = 1.0
  // (2 + 3 x 1.0 / 2.0) / (2 + 5 + 3) = 3.5 / 10
  EXPECT_NEAR(*prefill_share(t), 0.35, 1e-12);
  EXPECT_FALSE(prefill_share(StepTotals{}).has_value());
}

TEST(Cost, RunVolumeCountsGoodTokensAndFallsBackToTimeToFirstToken) {
  loadgen::RunResult run;
  run.summary.duration = 4.0;
  run.summary.prompt_tokens = 30;
  run.summary.output_tokens = 5;
  run.summary.completed = 2;
  run.summary.slo.ttft = 0.8;
  loadgen::RequestRecord slow, fast;
  slow.token_times = {1.0, 2.0, 3.0};  // TTFT 1.0 s: misses the 0.8 s SLO
  slow.end_time = 3.0;
  slow.output_tokens = 3;
  fast.token_times = {0.5, 1.5};  // TTFT 0.5 s: meets it
  fast.end_time = 1.5;
  fast.output_tokens = 2;
  run.records = {slow, fast};
  const RunVolume v = run_volume(run, nullptr);
  EXPECT_EQ(v.good_output_tokens, 2.0);
  EXPECT_EQ(v.good_requests, 1u);
  // (1.0 + 0.5) / (3.0 + 1.5)
  EXPECT_NEAR(v.prefill_share, 1.0 / 3.0, 1e-12);
  EXPECT_EQ(v.share_source, "time to first token");
}

Finding lever(const std::string& flag, const std::string& value, Metric metric, double before,
              double after) {
  Finding f;
  f.id = "lever";
  f.fires = true;
  f.flags = {{flag, value}};
  f.prediction = Prediction{metric, before, after};
  return f;
}

TEST(Cost, AFasterDecodeSavesOnOutputTokensOnly) {
  // TPOT 100 ms -> 50 ms at a flat $3.60/h: output 8.00 -> 4.00; input stays 0.40; at the SLO
  // the whole time shrinks to 0.2 x 1 + 0.8 x 0.5 = 0.6: 20.00 -> 12.00.
  const LeverCost c = predict_lever_cost(lever("--spec", "ngram", Metric::kTpotP50, 0.1, 0.05),
                                         state(), Price{3.6, 0, 0}, volume());
  EXPECT_NEAR(*c.saving_output, 4.0, 1e-9);
  EXPECT_NEAR(*c.saving_input, 0.0, 1e-12);
  EXPECT_NEAR(*c.saving_at_slo, 8.0, 1e-9);
  EXPECT_EQ(c.memory_delta, 0);
  EXPECT_FALSE(c.numerics);
}

TEST(Cost, ThroughputScalesBothAndMoreMemoryRaisesThePerGibPrice) {
  // 100 -> 200 tok/s: every cost halves: input 0.40 -> 0.20, output 8.00 -> 4.00.
  const LeverCost fast =
      predict_lever_cost(lever("--batching", "continuous", Metric::kOutputThroughput, 100, 200),
                         state(), Price{3.6, 0, 0}, volume());
  EXPECT_NEAR(*fast.saving_input, 0.2, 1e-9);
  EXPECT_NEAR(*fast.saving_output, 4.0, 1e-9);

  // $1.80 per GiB-hour x 2 GiB = $3.60/h. --kv-memory 3GiB adds 2 GiB (1 GiB now): $7.20/h.
  // Predicted on preemptions only: no time change, but the doubled price doubles the costs:
  // input 0.40 -> 0.80 (saving -0.40), output 8.00 -> 16.00 (saving -8.00).
  const LeverCost kv = predict_lever_cost(lever("--kv-memory", "3GiB", Metric::kPreemptions, 37, 0),
                                          state(), Price{0, 0, 1.8}, volume());
  EXPECT_EQ(kv.memory_delta, static_cast<int64_t>(2ull << 30));
  EXPECT_NEAR(kv.usd_per_hour_after, 7.2, 1e-9);
  EXPECT_NEAR(*kv.saving_input, -0.4, 1e-9);
  EXPECT_NEAR(*kv.saving_output, -8.0, 1e-9);
  EXPECT_NE(kv.note.find("preemptions"), std::string::npos) << kv.note;

  // ITL p99 only and no memory change: no saving figure at all.
  const LeverCost itl =
      predict_lever_cost(lever("--prefill-chunk", "256", Metric::kItlP99, 0.3, 0.1), state(),
                         Price{3.6, 0, 0}, volume());
  EXPECT_FALSE(itl.saving_output.has_value());
  EXPECT_FALSE(itl.saving_input.has_value());
}

TEST(Cost, QuantizationFreesWeightBytesAndChangesNumerics) {
  // 2^29 parameters at 2 bytes -> 34/32 bytes: 2^29 x (1.0625 - 2) = -503,316,480 bytes.
  const Finding q = lever("--quantize", "q8_0", Metric::kTpotP50, 0.1, 0.06);
  EXPECT_EQ(lever_memory_delta(q, state()), -503316480);
  EXPECT_TRUE(changes_numerics(q));
  EXPECT_TRUE(changes_numerics(lever("--kv-type", "q8_0", Metric::kPreemptions, 1, 0)));
  // --kv-type keeps the budget's bytes.
  EXPECT_EQ(lever_memory_delta(lever("--kv-type", "q8_0", Metric::kPreemptions, 1, 0), state()), 0);
  // Per GiB-hour only ($1/GiB/h): 2 GiB -> 2 GiB - 503,316,480 B = 1.53125 GiB, and TPOT x 0.6:
  // output 0.8 x 2/3600 x 100 / 10,000 x 1e6 = 4.4444 -> x (1.53125 / 2) x 0.6.
  const LeverCost c = predict_lever_cost(q, state(), Price{0, 0, 1.0}, volume());
  const double before = 0.8 * 2.0 / 3600.0 * 100.0 / 10000.0 * 1e6;
  EXPECT_NEAR(*c.saving_output, before - before * (1.53125 / 2.0) * 0.6, 1e-9);
  EXPECT_TRUE(c.numerics);
  EXPECT_FALSE(c.perplexity.has_value());
  // Unmeasured quality is said to be unmeasured, never given a number.
  CostReport r;
  r.price = Price{0, 0, 1.0};
  r.volume = volume();
  r.levers = {c};
  EXPECT_NE(format_cost_report(r).find("not measured"), std::string::npos);
  EXPECT_EQ(cost_report_to_json(r)["levers"][0]["quality"], "not measured");
}

TEST(Cost, AMeasuredLeverIsPricedFromItsOwnRunAndFootprint) {
  // B finished the same tokens in 50 s on the same footprint: every cost halves.
  RunVolume b = volume();
  b.seconds = 50;
  const LeverCost c = measured_lever_cost(lever("--spec", "ngram", Metric::kTpotP50, 0.1, 0.05),
                                          state(), volume(), state(), b, Price{3.6, 0, 0});
  EXPECT_TRUE(c.measured);
  EXPECT_NEAR(*c.saving_input, 0.2, 1e-9);
  EXPECT_NEAR(*c.saving_output, 4.0, 1e-9);
  EXPECT_NEAR(*c.saving_at_slo, 10.0, 1e-9);
}

}  // namespace
}  // namespace rapide::advise
