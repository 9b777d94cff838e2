// The vectorised attention job, written once over a SIMD policy `S` and instantiated per
// ISA (attention_kernels_avx2.cpp, attention_kernels_avx512.cpp).
//
// Three passes over the positions the job's queries see:
//   1. scores: K is stored transposed, so one tile of S::kLanes positions is scored with
//      head_dim broadcast-FMAs per query and no horizontal sums; each K tile is converted
//      from f16 once and used by every query of the job (GQA heads, several tokens);
//   2. softmax per query over its own positions (vector exp, probabilities rounded to f16
//      for an f16 cache as llama.cpp does);
//   3. the probability-weighted sum of V rows, each V row converted once for all queries.
// A query's arithmetic does not depend on the other queries of its job (its sums run in the
// same order whatever NQ is), which keeps batch invariance.
//
// Quantized caches (q8_0 / q4_0, layouts in model/kv_store.h): pass 1 quantizes each query
// per group and scores a tile with integer dot products (S::dot_group: vpdpbusd on
// AVX-512 VNNI, exact 16-bit multiply-adds on AVX2), then per group one conversion and one
// FMA with the two scales, in the scalar reference's order; pass 3 dequantizes each V row
// in registers (codes -> float, minus the offset, times the group's scale) and accumulates
// as for f32. Integer products for P·V would need the probabilities quantized too, for a
// loop that is already load-bound on the V row.
//
// S must provide: type V, kLanes, zero(), set1(float), load(const float*), store(float*, V),
// fmadd(a, b, c) = a*b + c, add, sub, mul, max, reduce_add, reduce_max, exp (for x <= 0),
// round_f16, keep_first(V, count, fill) (lanes >= count replaced by fill), load_f16(p, count)
// and load_f32(p, count) (count <= kLanes lanes, the rest zero), the constexpr
// value_vectors(NQ): output vectors per query accumulated in registers in pass 3, and for
// quantized caches dot_group<kQ4, NQ>(codes, word_row_bytes, q, group, count, out) (the
// exact integer dot products, as floats, of NQ query groups with `count` keys' codes) and
// load_codes<kQ4>(row, dim) (kLanes value codes from dimension dim, as floats).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_scores.h"
#include "kernels/kv_rows.h"

namespace rapide::attention_simd {

template <typename S, bool kF16>
inline typename S::V load_cache(const uint8_t* part, size_t index, int count) {
  if constexpr (kF16) {
    return S::load_f16(reinterpret_cast<const uint16_t*>(part) + index, count);
  } else {
    return S::load_f32(reinterpret_cast<const float*>(part) + index, count);
  }
}

// A quantized part's geometry (model/kv_store.h), computed once per job: the layout's
// accessors divide, which the inner loops cannot afford.
struct QuantGeometry {
  int group = 0;
  int n_groups = 0;
  size_t word_row = 0;          // bytes of one row of 4-byte key words (block_size positions)
  size_t key_group = 0;         // bytes of the key words of one group
  size_t scales = 0;            // where a part's scales start
  size_t value_row = 0;         // code bytes of one value row
  size_t value_row_scales = 0;  // scale bytes of one value row
  float offset = 0.0f;

  explicit QuantGeometry(const KvLayout& layout) {
    if (!layout.quantized()) return;
    group = layout.group_size();
    n_groups = layout.n_groups();
    word_row = static_cast<size_t>(layout.block_size) * 4;
    key_group = layout.key_code_byte(0, group);
    scales = layout.code_bytes();
    value_row = layout.value_code_byte(1, 0);
    value_row_scales = static_cast<size_t>(n_groups) * sizeof(uint16_t);
    offset = static_cast<float>(layout.code_offset());
  }
};

inline float half_at(const uint8_t* p) {
  uint16_t half;
  std::memcpy(&half, p, sizeof(half));
  return _cvtsh_ss(half);
}

// The value at `slot` as CV vectors from dimension `dim` (the first n_vectors loaded, vector
// c in quantization group groups[c]). Quantized codes are dequantized as
// fma(code, scale, -offset * scale), one rounding of the exact scale * (code - offset): the
// scalar reference's value, bit for bit (offset is a power of two, so offset * scale is exact).
template <typename S, KvType T, int CV>
inline void load_value_row(const KvLayout& layout, const QuantGeometry& geo, const uint8_t* part,
                           int slot, int dim, int n_vectors, const int* groups,
                           typename S::V* row) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  if constexpr (T == KvType::kF16 || T == KvType::kF32) {
    for (int c = 0; c < CV; ++c) {
      row[c] = c < n_vectors ? load_cache<S, T == KvType::kF16>(
                                   part, layout.value_element(slot, dim + c * L), L)
                             : S::zero();
    }
  } else {
    const uint8_t* codes = part + slot * geo.value_row;
    const uint8_t* scales = part + geo.scales + slot * geo.value_row_scales;
    V scale = S::zero(), bias = S::zero();
    int group = -1;
    for (int c = 0; c < CV; ++c) {
      if (c >= n_vectors) {
        row[c] = S::zero();
        continue;
      }
      if (groups[c] != group) {  // one scale per group, not per vector
        group = groups[c];
        scale = S::set1(half_at(scales + group * sizeof(uint16_t)));
        bias = S::mul(scale, S::set1(-geo.offset));
      }
      row[c] =
          S::fmadd(S::template load_codes<T == KvType::kQ4_0>(codes, dim + c * L), scale, bias);
    }
  }
}

// Unscaled scores of NQ quantized queries against the `count` keys of a tile from `slot`.
template <typename S, int NQ, KvType T>
inline void score_quantized_tile(const QuantGeometry& geo, const uint8_t* keys, int slot, int count,
                                 const QuantizedQuery* const* qq, typename S::V* acc) {
  using V = typename S::V;
  for (int j = 0; j < NQ; ++j) acc[j] = S::zero();
  const uint8_t* codes = keys + static_cast<size_t>(slot) * 4;
  const uint8_t* scales = keys + geo.scales + static_cast<size_t>(slot) * sizeof(uint16_t);
  const size_t scale_row = geo.word_row / 2;  // block_size f16 scales per group
  for (int g = 0; g < geo.n_groups; ++g, codes += geo.key_group, scales += scale_row) {
    const int8_t* q[NQ];
    for (int j = 0; j < NQ; ++j) q[j] = qq[j]->q + g * geo.group;
    V dots[NQ];
    S::template dot_group<T == KvType::kQ4_0, NQ>(codes, geo.word_row, q, geo.group, count, dots);
    const V key_scale = S::load_f16(reinterpret_cast<const uint16_t*>(scales), count);
    for (int j = 0; j < NQ; ++j) {
      const V offset = S::set1(static_cast<float>(qq[j]->offset_sum[g]));
      acc[j] = S::fmadd(S::mul(S::set1(qq[j]->d[g]), key_scale), S::sub(dots[j], offset), acc[j]);
    }
  }
}

// Software prefetch of a decode job's K/V, which is cold: a step of 32 sequences reads each
// (layer, head) part once, a 2 KiB run (f16, head_dim 64) every block_bytes() (192 KiB for
// synth100m), so the hardware prefetcher restarts on every run and each block began with a
// DRAM miss. The job's shared blocks form one stream, its K parts then its V parts; while
// item i is computed, item i + kPrefetchAhead is requested. Measured on Zen 5 (1 thread,
// forward decode tokens per CPU-second, synth100m Q8_0, 32 sequences at contexts 128-176,
// medians of 3 paired runs): 1737 -> 1895 (+9 %); 3 items ahead plus the next job's first
// block requested by the planner measured 3 % below 2 ahead.
constexpr int kPrefetchAhead = 2;

struct KvPrefetch {
  const AttentionJob& job;
  size_t k_offset, v_offset, part_bytes;
  int first_block, blocks;  // the shared blocks [first_block, first_block + blocks)

  // Item i < blocks: K part of block first_block + i; then the V parts.
  void request(int i) const {
    if (i < 0 || i >= 2 * blocks) return;
    const bool value = i >= blocks;
    const int block = first_block + (value ? i - blocks : i);
    const uint8_t* part = job.kv->block_data(job.blocks[block]) + (value ? v_offset : k_offset);
    for (size_t off = 0; off < part_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(part + off), _MM_HINT_T0);
    }
  }
};

template <typename S, int NQ, KvType T>
void attend_job(const AttentionJob& job) {
  constexpr bool kF16 = T == KvType::kF16;
  constexpr bool kQuantized = kv_type_quantized(T);
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int CV = S::value_vectors(NQ);
  const KvLayout& layout = job.kv->layout();
  const int d = layout.head_dim;
  const int block_size = layout.block_size;
  const int max_positions = job.max_positions;
  const size_t k_offset = layout.offset(job.layer, false, job.kv_head);
  const size_t v_offset = layout.offset(job.layer, true, job.kv_head);
  const QuantGeometry geo(layout);

  alignas(64) float q[NQ][kMaxHeadDim];
  QuantizedQuery quantized[kQuantized ? NQ : 1];
  const QuantizedQuery* qq[NQ];
  float* scores[NQ];
  for (int j = 0; j < NQ; ++j) {
    if constexpr (kQuantized) {
      quantize_query(layout, job.q[j], quantized[j]);
      qq[j] = &quantized[j];
    }
    for (int i = 0; i < d; i += L) {
      const V row = S::load(job.q[j] + i);
      S::store(q[j] + i, kF16 ? S::round_f16(row) : row);
    }
    scores[j] = job.scores + job.scores_stride * j;
  }

  // 1. Scores, a tile of L positions at a time. Two accumulator chains per query (even and
  // odd dimensions) hide the FMA latency even when a job has a single query.
  const V scale = S::set1(job.scale);
  const int shared = job.shared_positions;
  // With a sliding window, whole blocks before every query's window are neither scored nor
  // summed (their probabilities are zero; pass 2 sets their scores to -inf).
  int skip = 0;
  if (job.window > 0) {
    skip = max_positions;
    for (int j = 0; j < NQ; ++j) skip = std::min(skip, job.n_positions[j] - job.window);
    skip = std::max(0, skip) / block_size * block_size;
  }
  const KvPrefetch prefetch{job,
                            k_offset,
                            v_offset,
                            layout.part_bytes(),
                            skip / block_size,
                            (shared - skip + block_size - 1) / block_size};
  for (int i = 0; i < kPrefetchAhead; ++i) prefetch.request(i);
  for (int start = skip; start < shared; start += block_size) {
    prefetch.request((start - skip) / block_size + kPrefetchAhead);
    const uint8_t* keys = job.kv->block_data(job.blocks[start / block_size]) + k_offset;
    const int in_block = std::min(block_size, shared - start);
    for (int slot = 0; slot < in_block; slot += L) {
      const int count = std::min(L, in_block - slot);
      if constexpr (kQuantized) {
        V acc[NQ];
        score_quantized_tile<S, NQ, T>(geo, keys, slot, count, qq, acc);
        for (int j = 0; j < NQ; ++j) S::store(scores[j] + start + slot, S::mul(acc[j], scale));
        continue;
      }
      V even[NQ], odd[NQ];
      for (int j = 0; j < NQ; ++j) even[j] = odd[j] = S::zero();
      for (int i = 0; i < d; i += 2) {
        const V k0 = load_cache<S, kF16>(keys, layout.key_element(slot, i), count);
        const V k1 = load_cache<S, kF16>(keys, layout.key_element(slot, i + 1), count);
        for (int j = 0; j < NQ; ++j) {
          even[j] = S::fmadd(S::set1(q[j][i]), k0, even[j]);
          odd[j] = S::fmadd(S::set1(q[j][i + 1]), k1, odd[j]);
        }
      }
      // A tile that runs past the block end is rewritten by the next block's first tile.
      for (int j = 0; j < NQ; ++j) {
        S::store(scores[j] + start + slot, S::mul(S::add(even[j], odd[j]), scale));
      }
    }
  }
  // Each query's own positions past the shared ones (a job of several sequences): the same
  // arithmetic, one query at a time through its sequence's block table.
  for (int j = 0; j < NQ; ++j) {
    const int n = job.n_positions[j];
    for (int start = shared; start < n; start += block_size) {
      const uint8_t* keys = job.kv->block_data(job.query_blocks[j][start / block_size]) + k_offset;
      const int in_block = std::min(block_size, n - start);
      for (int slot = 0; slot < in_block; slot += L) {
        const int count = std::min(L, in_block - slot);
        if constexpr (kQuantized) {
          V acc;
          score_quantized_tile<S, 1, T>(geo, keys, slot, count, &qq[j], &acc);
          S::store(scores[j] + start + slot, S::mul(acc, scale));
          continue;
        }
        V even = S::zero(), odd = S::zero();
        for (int i = 0; i < d; i += 2) {
          even = S::fmadd(S::set1(q[j][i]),
                          load_cache<S, kF16>(keys, layout.key_element(slot, i), count), even);
          odd = S::fmadd(S::set1(q[j][i + 1]),
                         load_cache<S, kF16>(keys, layout.key_element(slot, i + 1), count), odd);
        }
        S::store(scores[j] + start + slot, S::mul(S::add(even, odd), scale));
      }
    }
  }

  // 2. Softmax of each query over its own positions; probabilities past them are zero, and
  // so are those before its window (the vector exp of -inf is tiny, not zero: reset below).
  for (int j = 0; j < NQ; ++j) {
    float* s = scores[j];
    const int n = job.n_positions[j];
    const bool shaped = job.window > 0 || job.softcap > 0.0f;
    const int first = shaped ? shape_attention_scores(s, n, job.window, job.softcap) : 0;
    const int full = n / L * L;
    V running_max = S::set1(-INFINITY);
    for (int p = 0; p < full; p += L) running_max = S::max(running_max, S::load(s + p));
    if (full < n) {
      running_max = S::max(running_max, S::keep_first(S::load(s + full), n - full, -INFINITY));
    }
    const V max_score = S::set1(S::reduce_max(running_max));
    V sum = S::zero();
    for (int p = 0; p < full; p += L) {
      const V e = S::exp(S::sub(S::load(s + p), max_score));
      S::store(s + p, e);
      sum = S::add(sum, e);
    }
    if (full < n) {
      const V e = S::keep_first(S::exp(S::sub(S::load(s + full), max_score)), n - full, 0.0f);
      S::store(s + full, e);
      sum = S::add(sum, e);
    }
    for (int p = (n + L - 1) / L * L; p < max_positions; p += L) S::store(s + p, S::zero());
    const V inv_sum = S::set1(1.0f / S::reduce_add(sum));
    for (int p = 0; p < n; p += L) {
      V prob = S::mul(S::load(s + p), inv_sum);
      if constexpr (kF16) prob = S::round_f16(prob);
      S::store(s + p, prob);
    }
    std::fill(s, s + first, 0.0f);
  }

  // 3. Weighted sum of V rows, CV output vectors per query at a time.
  // The quantization group of output vector c starting at dim (0 for float caches).
  auto group_of = [&](int dim, int c) { return kQuantized ? (dim + c * L) / geo.group : 0; };
  for (int dim = 0; dim < d; dim += CV * L) {
    const int n_vectors = std::min(CV, (d - dim) / L);
    int groups[CV];
    for (int c = 0; c < CV; ++c) groups[c] = group_of(dim, c);
    V acc[NQ][CV];
    for (int j = 0; j < NQ; ++j) {
      for (int c = 0; c < CV; ++c) acc[j][c] = S::zero();
    }
    for (int start = skip; start < shared; start += block_size) {
      if (dim == 0)
        prefetch.request(prefetch.blocks + (start - skip) / block_size + kPrefetchAhead);
      const uint8_t* values = job.kv->block_data(job.blocks[start / block_size]) + v_offset;
      const int in_block = std::min(block_size, shared - start);
      for (int slot = 0; slot < in_block; ++slot) {
        V row[CV];
        load_value_row<S, T, CV>(layout, geo, values, slot, dim, n_vectors, groups, row);
        for (int j = 0; j < NQ; ++j) {
          const V p = S::set1(scores[j][start + slot]);
          for (int c = 0; c < CV; ++c) {
            if (c < n_vectors) acc[j][c] = S::fmadd(p, row[c], acc[j][c]);
          }
        }
      }
    }
    for (int j = 0; j < NQ; ++j) {
      for (int c = 0; c < n_vectors; ++c) S::store(job.out[j] + dim + c * L, acc[j][c]);
    }
  }
  // Each query's own positions: its sums continue, in position order, from the shared part's
  // (stored to and reloaded from `out` exactly).
  constexpr int CV1 = S::value_vectors(1);
  for (int j = 0; j < NQ; ++j) {
    const int n = job.n_positions[j];
    if (shared >= n) continue;
    for (int dim = 0; dim < d; dim += CV1 * L) {
      const int n_vectors = std::min(CV1, (d - dim) / L);
      int groups[CV1];
      for (int c = 0; c < CV1; ++c) groups[c] = group_of(dim, c);
      V acc[CV1];
      for (int c = 0; c < CV1; ++c) {
        acc[c] = c < n_vectors ? S::load(job.out[j] + dim + c * L) : S::zero();
      }
      for (int start = shared; start < n; start += block_size) {
        const uint8_t* values =
            job.kv->block_data(job.query_blocks[j][start / block_size]) + v_offset;
        const int in_block = std::min(block_size, n - start);
        for (int slot = 0; slot < in_block; ++slot) {
          const V p = S::set1(scores[j][start + slot]);
          V row[CV1];
          load_value_row<S, T, CV1>(layout, geo, values, slot, dim, n_vectors, groups, row);
          for (int c = 0; c < CV1; ++c) {
            if (c < n_vectors) acc[c] = S::fmadd(p, row[c], acc[c]);
          }
        }
      }
      for (int c = 0; c < n_vectors; ++c) S::store(job.out[j] + dim + c * L, acc[c]);
    }
  }
}

// Dispatches on the job's query count (1..kMaxQueries) and the cache element type.
template <typename S, int kMaxQueries>
void attend_job_dispatch(const AttentionJob& job) {
  static_assert(kMaxQueries >= 1 && kMaxQueries <= kMaxJobQueries);
  const KvType type = job.kv->layout().type;
  auto run = [&]<int NQ>() {
    switch (type) {
      case KvType::kF16:
        return attend_job<S, NQ, KvType::kF16>(job);
      case KvType::kF32:
        return attend_job<S, NQ, KvType::kF32>(job);
      case KvType::kQ8_0:
        return attend_job<S, NQ, KvType::kQ8_0>(job);
      case KvType::kQ4_0:
        return attend_job<S, NQ, KvType::kQ4_0>(job);
    }
  };
  // Runs the instantiation whose NQ equals the job's query count; false when none does.
  auto run_matching = [&]<int... Is>(std::integer_sequence<int, Is...>) {
    return ((job.n_queries == Is + 1 && (run.template operator()<Is + 1>(), true)) || ...);
  };
  if (!run_matching(std::make_integer_sequence<int, kMaxQueries>())) {
    attend_job_scalar(job);  // more queries than planned for: a planner bug, still answered right
  }
}

}  // namespace rapide::attention_simd
