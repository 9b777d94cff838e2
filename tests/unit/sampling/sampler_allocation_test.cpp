// After its first call, Sampler::sample must not allocate: it runs once per sequence per
// decode step. Counts allocations by replacing the global operator new for this binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace {
thread_local bool g_counting = false;
thread_local int g_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace rapide {
namespace {

TEST(SamplerAllocationTest, NoAllocationAfterTheFirstCall) {
  constexpr int kVocab = 32000;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& l : logits) l = normal(rng);
  std::vector<int32_t> history(300);
  for (int32_t& t : history) t = static_cast<int32_t>(rng() % kVocab);

  std::vector<SamplingParams> configs(6);
  configs[0].temperature = 0.0f;
  configs[1].top_k = 40;
  configs[1].top_p = 0.9f;
  configs[1].repetition_penalty = 1.1f;
  configs[2].top_p = 0.95f;
  configs[2].top_logprobs = 5;
  configs[3].min_p = 0.05f;
  configs[3].frequency_penalty = 0.5f;
  configs[3].logit_bias = {{1, 2.0f}};
  configs[4].top_k = 10000;  // nth_element path
  configs[5].n_probs = 5000;
  configs[5].logprobs = true;
  for (const SamplingParams& params : configs) {
    Sampler sampler(params, kVocab, std::vector<int32_t>{2});
    std::vector<float> row = logits;
    sampler.sample(row, history);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < 5; ++i) {
      row = logits;  // same size: no allocation
      sampler.sample(row, history);
    }
    g_counting = false;
    EXPECT_EQ(g_allocations, 0) << "top_k " << params.top_k << " top_p " << params.top_p;
  }
}

}  // namespace
}  // namespace rapide
