// Q8_0 groups (the quantized cache's queries and K/V rows) on AVX-512: the same bytes as
// quantize_q8_groups_scalar (kv_rows.cpp; tests/unit/kernels/kv_rows_test.cpp compares
// them through quantize_query), a group per pair of vectors. The scalar one goes through
// quantize_row and the software f16 conversion per group: a quantized-cache attention job
// spent 14 % of its time there (attention_bench decode of one sequence, q8_0 cache, perf
// record), for a few dozen values per query.
#include "kernels/avx512_common.h"  // first: GCC 12's intrinsics warnings
#include "kernels/kv_rows.h"

namespace rapide {

void quantize_q8_groups_avx512(const float* x, int n_groups, int group, int8_t* codes,
                               uint16_t* scales, int32_t* sums) {
  const __mmask16 low = static_cast<__mmask16>(group >= 16 ? 0xFFFFu : (1u << group) - 1u);
  const __mmask16 high = static_cast<__mmask16>(group > 16 ? (1u << (group - 16)) - 1u : 0u);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 half = _mm512_set1_ps(0.5f);
  const __m512 limit = _mm512_set1_ps(2147483648.0f);
  const __m512 minus_half = _mm512_set1_ps(-0.5f);
  const __m512i one = _mm512_set1_epi32(1);
  // round_half_away (quantize.cpp) of v * id: non-finite and out-of-range products become
  // 0, the exact fraction past the truncation decides; stores the codes, returns them.
  auto quantize_half = [&](__m512 v, __m512 id, __mmask16 lanes, int8_t* dst) {
    const __m512 p = _mm512_mul_ps(v, id);
    const __mmask16 in_range = _mm512_cmp_ps_mask(_mm512_abs_ps(p), limit, _CMP_LT_OQ);
    const __m512 finite = _mm512_maskz_mov_ps(in_range, p);
    __m512i t = _mm512_cvttps_epi32(finite);
    const __m512 frac = _mm512_sub_ps(finite, _mm512_cvtepi32_ps(t));
    t = _mm512_mask_add_epi32(t, _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ), t, one);
    t = _mm512_mask_sub_epi32(t, _mm512_cmp_ps_mask(frac, minus_half, _CMP_LE_OQ), t, one);
    // vpmovdb truncates like the scalar static_cast<int8_t>.
    const __m128i codes = _mm512_cvtepi32_epi8(t);
    _mm_mask_storeu_epi8(dst, lanes, codes);
    return _mm512_cvtepi8_epi32(codes);
  };
  for (int g = 0; g < n_groups; ++g) {
    const float* xg = x + g * group;
    const __m512 v0 = _mm512_maskz_loadu_ps(low, xg);
    const __m512 v1 = _mm512_maskz_loadu_ps(high, xg + 16);
    // max_ps returns its second operand when either is NaN: a NaN never wins, as in the
    // scalar block's running maxima.
    const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a1, _mm512_max_ps(a0, zero)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    // fp32_to_fp16 rounds to nearest even, as F16C does.
    scales[g] = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i c0 = quantize_half(v0, id, low, codes + g * group);
    const __m512i c1 = quantize_half(v1, id, high, codes + g * group + 16);
    if (sums != nullptr) sums[g] = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
  }
}

}  // namespace rapide
