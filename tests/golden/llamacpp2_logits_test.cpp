// rapide against shared/reference/llamacpp2 (its README is the source of every reference
// figure quoted here): Llama 3's rope scaling (with and without rope_freqs.weight), OLMo 2,
// Granite, Command R7B (cohere2) and Gemma 1, computed by llama.cpp; Qwen3 and Gemma 3 as
// Hugging Face folders whose logits come from a float64 numpy transcription of transformers
// (README section 4: not llama.cpp). DeepSeek 2 has its own file (deepseek2_logits_test.cpp).
//
// Each sequence of tokens.txt runs as one batch from an empty cache with logits on every row
// (README 10), compared per position (max |d| and mean |d|), over the sequence (mean |d|) and
// on top-1 wherever the reference's top-1/top-2 margin exceeds 2 * max_tol; then the greedy
// continuation (the decode path, one token a step) and the perplexity of README 7.
//
// Tolerances (the measured figures are in TOLERANCES below, worst of the ISAs run):
// * llama.cpp files: the README's float-engine floor is 0.035 max |d| (6.1: a float64 forward
//   against llama.cpp, up to 0.0347 for gemma); rapide computes like llama.cpp (F16 KV, ggml's
//   angles and GELU table), so it lands far closer. max_tol is 2x the worst measured row, and
//   at most 0.035; every mistake of README 6.3 moves max |d| by 1.69 or more, and the
//   rope_freqs mistake (section 2) by 0.112 on story64, 0.322 on long200.
// * the transcriptions (qwen3-hf, gemma3-hf): rapide's F16 KV cache and GELU table against
//   float64; the README's cheapest mistake moves max |d| by 1.42 (qwen3) and 2.02 (gemma3).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "golden/greedy_runner.h"
#include "golden/llamacpp_reference.h"
#include "golden/logits_compare.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const std::string kDir = "reference/llamacpp2/";

struct ModelCase {
  std::string name;  // logits/<name>.<seq>.logits
  std::string path;  // under kDir: models/<name>.gguf or hf/<dir>
  std::string greedy_file;
  float max_tol = 0;       // per-position max |d|
  float row_mean_tol = 0;  // per-position mean |d|
  float seq_mean_tol = 0;  // mean |d| over a sequence
  double ppl = 0;          // llama.cpp's perplexity (README 7); 0: none
};

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.name;
}

// TOLERANCES. Measured on an AMD EPYC (AVX-512), identical to 3 digits with RAPIDE_ISA=avx2
// and scalar; worst over the sequences shipped:
//
//   model                    max |d|   worst row mean  sequence mean | README: noise / cheapest
//   llama3-rope-F32          1.31e-3   3.2e-4          2.5e-5        |  3.9e-3 / 0.112 (no freqs)
//   llama3-rope-nofreqs-F32  1.45e-3   3.7e-4          4.4e-5        |  3.9e-3 / -
//   olmo2-F32                4.2e-3    1.14e-3         3.2e-4        |  7.6e-3 / 2.21
//   granite-F32              4.1e-5    1.0e-5          9.0e-7        |  1.6e-3 / 2.32
//   cohere2-F32              3.3e-3    9.2e-4          2.4e-4        |  1.3e-2 / 2.72
//   gemma-F32                2.2e-3    5.7e-4          4.6e-5        |  3.5e-2 / 1.69
//   qwen3-hf                 5.4e-3    1.08e-3         4.7e-4        |  -      / 1.42
//   gemma3-hf                3.6e-2    8.1e-3          2.2e-3        |  -      / 2.02
//
// Bounds are about 2x the measured figure (at least the llama reference test's 5e-3 for max
// |d|) and stay 10x or more below the cheapest mistake of README 6.3 except for the rope
// factors (0.112, still 20x). gemma3-hf's larger gap is rapide's F16 KV cache and ggml's F16
// GELU table against a float64 forward over 6 layers with post-norms of scale ~3 (README 9).
// Perplexity: every llama.cpp file within 0.0015 % (the bar is 0.5 %).
const std::vector<ModelCase> kModels = {
    {"llama3-rope-F32", "models/llama3-rope-F32.gguf", "greedy.tsv", 5e-3f, 1e-3f, 1e-4f,
     11751.7031},
    {"llama3-rope-nofreqs-F32", "models/llama3-rope-nofreqs-F32.gguf", "greedy.tsv", 5e-3f, 1e-3f,
     1e-4f, 11765.7919},
    {"olmo2-F32", "models/olmo2-F32.gguf", "greedy.tsv", 1e-2f, 2.5e-3f, 7e-4f, 11864.2089},
    {"granite-F32", "models/granite-F32.gguf", "greedy.tsv", 5e-3f, 1e-3f, 1e-4f, 3426.8999},
    {"cohere2-F32", "models/cohere2-F32.gguf", "greedy.tsv", 8e-3f, 2e-3f, 5e-4f, 3644.7057},
    {"gemma-F32", "models/gemma-F32.gguf", "greedy.tsv", 5e-3f, 1.2e-3f, 1e-4f, 3612.5263},
    {"qwen3-hf", "hf/qwen3", "greedy-hf.tsv", 1.2e-2f, 2.5e-3f, 1e-3f, 0},
    {"gemma3-hf", "hf/gemma3", "greedy-hf.tsv", 7.5e-2f, 1.6e-2f, 5e-3f, 0},
};

class LlamaCpp2 : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kDir + "tokens.txt");
    RAPIDE_REQUIRE_SHARED(kDir + GetParam().path);
  }
};

TEST_P(LlamaCpp2, EveryPositionMatches) {
  const ModelCase& c = GetParam();
  LoadedForTest t = load_for_test(shared_path(kDir + c.path));
  const int vocab = t.model->config().vocab_size;
  ASSERT_EQ(vocab, 512);
  ThreadPool pool(2);
  int sequences = 0;
  for (const ReferenceSequence& seq : read_reference_sequences(shared_path(kDir + "tokens.txt"))) {
    const std::string logits_file = kDir + "logits/" + c.name + "." + seq.name + ".logits";
    // long200 is shipped for some models only (README 1).
    if (!std::ifstream(shared_path(logits_file))) continue;
    const size_t n = seq.tokens.size();
    const std::vector<float> theirs = read_reference_logits(shared_path(logits_file), n, vocab);
    const std::vector<float> ours = all_logits(*t.model, seq.tokens, pool);
    ASSERT_EQ(ours.size(), theirs.size());
    ++sequences;
    float worst_max = 0;
    double worst_mean = 0, total_mean = 0;
    int checked_top1 = 0;
    for (size_t i = 0; i < n; ++i) {
      const float* o = ours.data() + i * vocab;
      const float* r = theirs.data() + i * vocab;
      const RowStats s = compare_row(o, r, vocab);
      worst_max = std::max(worst_max, s.max_abs);
      worst_mean = std::max(worst_mean, s.mean_abs);
      total_mean += s.mean_abs;
      EXPECT_LE(s.max_abs, c.max_tol) << c.name << " " << seq.name << " position " << i;
      EXPECT_LE(s.mean_abs, c.row_mean_tol) << c.name << " " << seq.name << " position " << i;
      const TopTwo ref = top_two(r, vocab);
      if (ref.margin > 2 * c.max_tol) {
        ++checked_top1;
        EXPECT_EQ(top_two(o, vocab).best, ref.best) << c.name << " " << seq.name << " position "
                                                    << i << ": reference margin " << ref.margin;
      }
    }
    const double seq_mean = total_mean / n;
    EXPECT_LE(seq_mean, c.seq_mean_tol) << c.name << " " << seq.name;
    std::printf(
        "%-24s %-8s max|d| %.3g (tol %.3g)  mean|d| worst row %.3g (tol %.3g), sequence %.3g "
        "(tol %.3g)  top-1 checked %d/%zu\n",
        c.name.c_str(), seq.name.c_str(), worst_max, c.max_tol, worst_mean, c.row_mean_tol,
        seq_mean, c.seq_mean_tol, checked_top1, n);
  }
  EXPECT_GE(sequences, 2);
}

// The decode path: the prompt as one batch, then one token per step through the KV store.
TEST_P(LlamaCpp2, GreedyContinuationMatches) {
  const ModelCase& c = GetParam();
  const GreedyReferenceRow ref = read_greedy_row(shared_path(kDir + c.greedy_file), c.name);
  ASSERT_EQ(ref.continuation.size(), ref.margins.size());
  LoadedForTest t = load_for_test(shared_path(kDir + c.path));
  const int vocab = t.model->config().vocab_size;
  ThreadPool pool(2);
  const int total = static_cast<int>(ref.prompt.size() + ref.continuation.size());
  ContiguousKvStore kv(t.model->config(), 1, total);
  Batch batch;
  for (size_t p = 0; p < ref.prompt.size(); ++p) {
    batch.add(ref.prompt[p], 0, static_cast<int>(p), p + 1 == ref.prompt.size());
  }
  int pos = static_cast<int>(ref.prompt.size());
  for (size_t step = 0; step < ref.continuation.size(); ++step) {
    const std::span<const float> logits = t.model->forward(batch, kv, pool);
    ASSERT_EQ(logits.size(), static_cast<size_t>(vocab));
    const int32_t ours = top_two(logits.data(), vocab).best;
    if (ours != ref.continuation[step]) {
      EXPECT_LE(ref.margins[step], 2 * c.max_tol)
          << c.name << " step " << step << ": rapide picks " << ours << ", the reference "
          << ref.continuation[step] << " with margin " << ref.margins[step];
      std::printf("%-24s greedy: diverges at step %zu, a near-tie (margin %.3g)\n", c.name.c_str(),
                  step, ref.margins[step]);
      return;
    }
    batch.clear();
    batch.add(ours, 0, pos++, true);
  }
  std::printf("%-24s greedy: all %zu tokens match\n", c.name.c_str(), ref.continuation.size());
}

// Perplexity as llama-perplexity -c 128 computes it (README 7 of both reference folders).
TEST_P(LlamaCpp2, PerplexityWithinHalfAPercent) {
  const ModelCase& c = GetParam();
  if (c.ppl == 0) GTEST_SKIP() << "no perplexity reference for the transcriptions (README 7)";
  RAPIDE_REQUIRE_SHARED("reference/text/stories-eval.txt");
  LoadedForTest t = load_for_test(shared_path(kDir + c.path));
  std::ifstream in(shared_path("reference/text/stories-eval.txt"), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int32_t> tokens = t.tokenizer->encode(text, /*add_bos=*/true);
  ASSERT_EQ(tokens.size(), 1529u);
  constexpr int kCtx = 128;
  ThreadPool pool(2);
  int count = 0;
  const double ppl = chunked_perplexity(*t.model, tokens, kCtx, pool, &count);
  ASSERT_EQ(count, 693);
  const double gap = std::fabs(ppl / c.ppl - 1);
  std::printf("%-24s PPL %.4f, llama.cpp %.4f (%.4f %%)\n", c.name.c_str(), ppl, c.ppl, 100 * gap);
  EXPECT_LE(gap, 0.005) << c.name;
}

// Sequences batched together, their prompts in 16-position chunks, give each row bit for bit
// what the sequence gives alone (windows, per-layer rope and parallel blocks included).
TEST_P(LlamaCpp2, BatchedSequencesGiveWhatEachGivesAlone) {
  const ModelCase& c = GetParam();
  LoadedForTest t = load_for_test(shared_path(kDir + c.path));
  ThreadPool pool(2);
  const std::vector<ReferenceSequence> seqs =
      read_reference_sequences(shared_path(kDir + "tokens.txt"));
  expect_chunked_batches_match_alone(*t.model, seqs, pool, c.name);
}

INSTANTIATE_TEST_SUITE_P(Reference, LlamaCpp2, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Llama 3's rope_freqs.weight must change the computation: the two files (the same weights,
// one without the tensor) give different logits in rapide, each matching its own reference
// (above). README 2: they differ by 0.112 max |d| on story64.
TEST(LlamaCpp2Rope, FreqFactorsChangeTheLogits) {
  RAPIDE_REQUIRE_SHARED(kDir + "models/llama3-rope-F32.gguf");
  RAPIDE_REQUIRE_SHARED(kDir + "models/llama3-rope-nofreqs-F32.gguf");
  LoadedForTest with = load_for_test(shared_path(kDir + "models/llama3-rope-F32.gguf"));
  LoadedForTest without = load_for_test(shared_path(kDir + "models/llama3-rope-nofreqs-F32.gguf"));
  EXPECT_TRUE(with.model->config().rope_freq_factors);
  EXPECT_FALSE(without.model->config().rope_freq_factors);
  ThreadPool pool(2);
  const std::vector<int32_t> story =
      read_reference_sequences(shared_path(kDir + "tokens.txt"))[0].tokens;
  const std::vector<float> a = all_logits(*with.model, story, pool);
  const std::vector<float> b = all_logits(*without.model, story, pool);
  float max_d = 0;
  for (size_t i = 0; i < a.size(); ++i) max_d = std::max(max_d, std::fabs(a[i] - b[i]));
  EXPECT_GT(max_d, 0.05f) << "rope_freqs.weight did not change the logits";
  std::printf("llama3-rope vs nofreqs in rapide: max |d| %.3g (README 2: 0.112)\n", max_d);
}

}  // namespace
}  // namespace rapide::testing
