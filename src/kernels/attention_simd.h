// The vectorised attention job, written once over a SIMD policy `S` and instantiated per
// ISA (attention_kernels_avx2.cpp, attention_kernels_avx512.cpp).
//
// Three passes over the positions the job's queries see:
//   1. scores: K is stored transposed, so one tile of S::kLanes positions is scored with
//      head_dim broadcast-FMAs per query and no horizontal sums; each K tile is converted
//      from f16 once and used by every query of the job (GQA heads, several tokens), and a
//      job of few queries scores two tiles per pass so each broadcast serves both;
//   2. softmax per query over its own positions (vector exp, probabilities rounded to f16
//      for an f16 cache as llama.cpp does);
//   3. the probability-weighted sum of V rows, each V row converted once for all queries.
// A query's arithmetic does not depend on the other queries of its job (its sums run in the
// same order whatever NQ is), which keeps batch invariance.
//
// Quantized caches (q8_0 / q4_0, layouts in kv/kv_store.h): pass 1 quantizes each query
// per group and scores a tile with integer dot products (S::dot_group: vpdpbusd on
// AVX-512 VNNI, exact 16-bit multiply-adds on AVX2), then per group one conversion and one
// FMA with the two scales, in the scalar reference's order; pass 3 quantizes each query's
// probabilities times the values' scales per chunk of positions (attention_value_weights.h)
// and sums them against the value codes, 4 positions per 32-bit lane (S::dot_quad: the
// V layout interleaves quads of positions), one conversion and one FMA per chunk and vector.
//
// S must provide: type V, kLanes, zero(), set1(float), load(const float*), store(float*, V),
// fmadd(a, b, c) = a*b + c, add, sub, mul, max, abs, reduce_add, reduce_max, exp (for x <= 0),
// round_f16, keep_first(V, count, fill) (lanes >= count replaced by fill), load_f16(p, count)
// and load_f32(p, count) (count <= kLanes lanes, the rest zero), the constexpr
// value_vectors(NQ): output vectors per query accumulated in registers in pass 3, and for
// quantized caches dot_group<kQ4, NQ>(codes, word_row_bytes, q, group, count, out) (the
// exact integer dot products, as floats, of NQ query groups with `count` keys' codes), an
// integer vector type VI with zero_i(), add_i, load_value_quad<kQ4>(quad, dim) (kLanes
// dimensions from dim of a quad's value codes, 4 positions per lane: q8_0 signed, q4_0
// unsigned), dot_quad<kQ4>(acc, codes, weights) (acc + the 4 weights' products with each
// lane's codes), to_float(acc, offset) = float(acc - offset), round_to_int(x) (to nearest
// even), store_weights(dst, codes) (kLanes codes as int8), reduce_add_i and
// quantize_query(layout, x, out) (kv_rows.h's bytes: the scalar one or its AVX-512 twin).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_scores.h"
#include "kernels/attention_value_weights.h"
#include "kernels/kv_rows.h"

namespace rapide::attention_simd {
// Internal to each kernel file: this header is compiled once per ISA (different -m flags),
// and an inline function shared between those files would be one weak symbol the linker
// takes from either, AVX-512 code included, whichever CPU runs it.
namespace {

template <typename S, bool kF16>
inline typename S::V load_cache(const uint8_t* part, size_t index, int count) {
  if constexpr (kF16) {
    return S::load_f16(reinterpret_cast<const uint16_t*>(part) + index, count);
  } else {
    return S::load_f32(reinterpret_cast<const float*>(part) + index, count);
  }
}

// A quantized part's geometry (kv/kv_store.h), computed once per job: the layout's
// accessors divide, which the inner loops cannot afford.
struct QuantGeometry {
  int group = 0;
  int n_groups = 0;
  size_t word_row = 0;    // bytes of one row of 4-byte key words (block_size positions)
  size_t key_group = 0;   // bytes of the key words of one group
  size_t scales = 0;      // where a part's scales start
  size_t value_quad = 0;  // code bytes of one quad of value positions
  int32_t offset = 0;

  explicit QuantGeometry(const KvLayout& layout) {
    if (!layout.quantized()) return;
    group = layout.group_size();
    n_groups = layout.n_groups();
    word_row = static_cast<size_t>(layout.block_size) * 4;
    key_group = layout.key_code_byte(0, group);
    scales = layout.code_bytes();
    value_quad = layout.value_code_byte(4, 0);
    offset = layout.code_offset();
  }
};

// The f16 / f32 value at `slot` as CV vectors from dimension `dim` (the first n_vectors
// loaded, the others zero).
template <typename S, bool kF16, int CV>
inline void load_value_row(const KvLayout& layout, const uint8_t* part, int slot, int dim,
                           int n_vectors, typename S::V* row) {
  constexpr int L = S::kLanes;
  for (int c = 0; c < CV; ++c) {
    row[c] = c < n_vectors ? load_cache<S, kF16>(part, layout.value_element(slot, dim + c * L), L)
                           : S::zero();
  }
}

// The weight codes of one query's chunk of `count` positions in one group
// (attention_value_weights.h): w = p * d (d: the chunk's value scales of the group, as
// vectors), quantized by the chunk's largest |w|. Fills `codes` to count rounded up to whole
// vectors (zeros past count) and returns the step; `offset_sum` gets code_offset * sum(codes)
// for q4_0, 0 for q8_0.
template <typename S, bool kQ4>
inline float quantize_value_weights(const QuantGeometry& geo, const float* p,
                                    const typename S::V* scales, int count, int8_t* codes,
                                    int32_t& offset_sum) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  V w[kValueChunk / L] = {};  // zeroed: GCC cannot see that both loops stop at `count`
  V max_weight = S::zero();
  for (int v = 0; v < kValueChunk / L && v * L < count; ++v) {
    w[v] = S::mul(S::load_f32(p + v * L, std::min(L, count - v * L)), scales[v]);
    max_weight = S::max(max_weight, S::abs(w[v]));
  }
  const ValueWeightScale scale = value_weight_scale(S::reduce_max(max_weight));
  const V inverse = S::set1(scale.inverse);
  int32_t sum = 0;
  for (int v = 0; v < kValueChunk / L && v * L < count; ++v) {
    const typename S::VI rounded = S::round_to_int(S::mul(w[v], inverse));
    S::store_weights(codes + v * L, rounded);
    if constexpr (kQ4) sum += S::reduce_add_i(rounded);
  }
  offset_sum = geo.offset * sum;
  return scale.step;
}

// Where a chunk's value codes and scales are: its positions run through up to kValueChunk / 4
// blocks (segments), each from a quad boundary; quad q's codes start at quad[q].
struct ValueChunk {
  int count = 0;
  int quads = 0;
  int segments = 0;
  const uint8_t* quad[kValueChunk / 4];
  const uint8_t* part[kValueChunk / 4];  // a segment's V part, its first slot and length
  int slot[kValueChunk / 4];
  int length[kValueChunk / 4];

  // block(b): the address of the b-th block of the positions' table.
  template <typename BlockAddress>
  ValueChunk(const QuantGeometry& geo, int block_size, BlockAddress&& block, size_t v_offset,
             int start, int n)
      : count(n) {
    for (int pos = start; pos < start + n; ++segments) {
      const int first = pos % block_size;
      const int len = std::min(start + n - pos, block_size - first);
      part[segments] = block(pos / block_size) + v_offset;
      slot[segments] = first;
      length[segments] = len;
      for (int q = 0; q * 4 < len; ++q) {
        quad[quads++] = part[segments] + static_cast<size_t>(first / 4 + q) * geo.value_quad;
      }
      pos += len;
    }
  }
};

// out[j] += the integer sums of one group's dimensions over a chunk's quads (kQuads of them,
// or chunk.quads when kQuads is 0), each query's weights in weights[j].
template <typename S, int NQ, bool kQ4, int kQuads>
inline void weigh_quads(const QuantGeometry& geo, const ValueChunk& chunk, int g,
                        const int8_t (*weights)[kValueChunk], const float* step,
                        const int32_t* offset_sum, float* const* out) {
  using VI = typename S::VI;
  constexpr int L = S::kLanes;
  const int quads = kQuads > 0 ? kQuads : chunk.quads;
  for (int dim = g * geo.group; dim < (g + 1) * geo.group; dim += L) {
    VI codes[kValueChunk / 4];
    for (int q = 0; q < quads; ++q) codes[q] = S::template load_value_quad<kQ4>(chunk.quad[q], dim);
    for (int j = 0; j < NQ; ++j) {
      // Two chains per query hide vpdpbusd's latency; integer sums are exact in any order.
      VI even = S::zero_i(), odd = S::zero_i();
      for (int q = 0; q + 1 < quads; q += 2) {
        even = S::template dot_quad<kQ4>(even, codes[q], weights[j] + 4 * q);
        odd = S::template dot_quad<kQ4>(odd, codes[q + 1], weights[j] + 4 * q + 4);
      }
      if (quads % 2 != 0) {
        even = S::template dot_quad<kQ4>(even, codes[quads - 1], weights[j] + 4 * (quads - 1));
      }
      S::store(out[j] + dim,
               S::fmadd(S::set1(step[j]), S::to_float(S::add_i(even, odd), offset_sum[j]),
                        S::load(out[j] + dim)));
    }
  }
}

// out[j] += query j's probabilities p[j][0, chunk.count) times the chunk's values, for NQ
// queries sharing those positions.
template <typename S, int NQ, bool kQ4>
inline void weigh_value_chunk(const KvLayout& layout, const QuantGeometry& geo,
                              const ValueChunk& chunk, const float* const* p, float* const* out) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  alignas(64) int8_t weights[NQ][kValueChunk];
  alignas(64) uint16_t half_scales[kValueChunk];
  float step[NQ];
  int32_t offset_sum[NQ];
  // Segments of whole vectors each (the usual 16-position blocks and 16-lane vectors): a
  // vector's scales are loaded from their block, not first gathered.
  bool direct = true;
  for (int s = 0; s < chunk.segments; ++s) direct = direct && chunk.length[s] == L;
  for (int g = 0; g < geo.n_groups; ++g) {
    V scales[kValueChunk / L] = {};  // as w[] in quantize_value_weights
    if (direct) {
      for (int v = 0; v < chunk.segments; ++v) {
        const size_t byte = layout.value_scale_byte(chunk.slot[v], g);
        scales[v] = S::load_f16(reinterpret_cast<const uint16_t*>(chunk.part[v] + byte), L);
      }
    } else {
      // The chunk's scales of group g, contiguous (a chunk may span blocks).
      for (int s = 0, at = 0; s < chunk.segments; at += chunk.length[s++]) {
        const size_t byte = layout.value_scale_byte(chunk.slot[s], g);
        std::memcpy(half_scales + at, chunk.part[s] + byte, chunk.length[s] * sizeof(uint16_t));
      }
      for (int v = 0; v < kValueChunk / L && v * L < chunk.count; ++v) {
        scales[v] = S::load_f16(half_scales + v * L, std::min(L, chunk.count - v * L));
      }
    }
    for (int j = 0; j < NQ; ++j) {
      step[j] =
          quantize_value_weights<S, kQ4>(geo, p[j], scales, chunk.count, weights[j], offset_sum[j]);
    }
    if (chunk.quads == kValueChunk / 4) {
      weigh_quads<S, NQ, kQ4, kValueChunk / 4>(geo, chunk, g, weights, step, offset_sum, out);
    } else {
      weigh_quads<S, NQ, kQ4, 0>(geo, chunk, g, weights, step, offset_sum, out);
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

// Score tiles of an f16 / f32 cache gathered for one pass over the dimensions: each
// broadcast query value then serves NT tiles (a decode job's few queries otherwise issue a
// load per FMA). Tiles keep their own accumulators, so every score is the same sum in the
// same order whichever tiles share the pass. Measured on Zen 5 (attention_bench, 1 thread,
// best of 5 alternated runs, together with weigh_rows below): decode of one sequence
// 10.2 -> 8.8 us, of 64 sequences 870 -> 792 us, a 300-position prefill 490 -> 431 us.
constexpr int kPairedTileQueries = 4;  // 2 tiles x 2 chains x NQ accumulators fit in zmm

// A cold K or V part prefetched a few lines per step of a loop over other data, so the
// misses overlap that loop's arithmetic instead of stalling it (KvPrefetch says why).
// Default-constructed: nothing to prefetch.
struct SpreadPrefetch {
  const uint8_t* part = nullptr;
  size_t lines = 0, per_step = 0;

  SpreadPrefetch() = default;
  SpreadPrefetch(const uint8_t* p, size_t bytes, int steps)
      : part(p), lines(bytes / 64), per_step((lines + steps - 1) / steps) {}
  // Lines [k * per_step, (k + 1) * per_step) of the part.
  void step(int k) const {
    if (per_step == 1) {  // the usual spread (a part's lines over as many steps): no loop
      if (static_cast<size_t>(k) < lines) {
        _mm_prefetch(reinterpret_cast<const char*>(part + static_cast<size_t>(k) * 64),
                     _MM_HINT_T0);
      }
      return;
    }
    const size_t end = std::min(lines, (static_cast<size_t>(k) + 1) * per_step);
    for (size_t line = static_cast<size_t>(k) * per_step; line < end; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(part + line * 64), _MM_HINT_T0);
    }
  }
};

template <int NT>
struct KeyTile {
  int n = 0;
  const uint8_t* keys[NT];
  int slot[NT] = {}, count[NT] = {}, position[NT] = {};
  SpreadPrefetch ahead[NT];  // fetched during the tile's pass over the dimensions
  // Adds a tile; true when NT are gathered (run them, which empties the list).
  bool add(const uint8_t* k, int s, int c, int pos, const SpreadPrefetch& pf) {
    keys[n] = k;
    slot[n] = s;
    count[n] = c;
    position[n] = pos;
    ahead[n] = pf;
    return ++n == NT;
  }
};

template <typename S, int NQ, bool kF16, int NT>
inline void score_float_tiles(const KvLayout& layout, KeyTile<NT>& tiles,
                              const float (*q)[kMaxHeadDim], typename S::V scale,
                              float* const* scores) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  const int d = layout.head_dim;
  const size_t row = layout.key_element(0, 1);  // elements from one key dimension to the next
  // kFull: every tile holds L positions (a decode job's usual case), so its loads take no
  // mask. With the count, the per-dimension index arithmetic and the prefetch loop inside
  // the tiles' loop, GCC kept the converted keys on the stack and re-read them per FMA:
  // `attention_bench` decode of one sequence (1 thread, the cache in L2, alternated runs)
  // 15.1-15.3 -> 8.5-8.7 us. The 32-sequence decode step, whose K/V come from DRAM, is
  // unchanged within 1 %.
  const auto pass = [&]<int N, bool kFull>() {
    size_t at[N];
    for (int t = 0; t < N; ++t) at[t] = layout.key_element(tiles.slot[t], 0);
    // Two accumulator chains per query and tile (even and odd dimensions).
    V even[N][NQ], odd[N][NQ];
    for (int t = 0; t < N; ++t) {
      for (int j = 0; j < NQ; ++j) even[t][j] = odd[t][j] = S::zero();
    }
    for (int i = 0; i < d; i += 2) {
      for (int t = 0; t < N; ++t) tiles.ahead[t].step(i / 2);
      V k0[N], k1[N];
      for (int t = 0; t < N; ++t) {
        const int count = kFull ? L : tiles.count[t];
        k0[t] = load_cache<S, kF16>(tiles.keys[t], at[t] + i * row, count);
        k1[t] = load_cache<S, kF16>(tiles.keys[t], at[t] + (i + 1) * row, count);
      }
      for (int j = 0; j < NQ; ++j) {
        const V q0 = S::set1(q[j][i]), q1 = S::set1(q[j][i + 1]);
        for (int t = 0; t < N; ++t) {
          even[t][j] = S::fmadd(q0, k0[t], even[t][j]);
          odd[t][j] = S::fmadd(q1, k1[t], odd[t][j]);
        }
      }
    }
    // A tile that runs past its block's end is rewritten by the next block's first tile,
    // which comes later in this pass or in the next.
    for (int t = 0; t < N; ++t) {
      for (int j = 0; j < NQ; ++j) {
        S::store(scores[j] + tiles.position[t], S::mul(S::add(even[t][j], odd[t][j]), scale));
      }
    }
  };
  bool full = true;
  for (int t = 0; t < tiles.n; ++t) full = full && tiles.count[t] == L;
  if (tiles.n == NT && NT > 1) {
    if (full) {
      pass.template operator()<NT, true>();
    } else {
      pass.template operator()<NT, false>();
    }
  } else if (full) {
    pass.template operator()<1, true>();
  } else {
    pass.template operator()<1, false>();
  }
  tiles.n = 0;
}

// Software prefetch of a decode job's K/V, which is cold: a step of 32 sequences reads each
// (layer, head) part once, a 2 KiB run (f16, head_dim 64) every block_bytes() (192 KiB for
// synth100m), so the hardware prefetcher restarts on every run and each block began with a
// DRAM miss. The job's shared blocks form one stream, its K parts then its V parts; while
// item i is computed, item i + kPrefetchAhead is requested. Measured on Zen 5 (1 thread,
// forward decode tokens per CPU-second, synth100m Q8_0, 32 sequences at contexts 128-176,
// medians of 3 paired runs): 1737 -> 1895 (+9 %); 3 items ahead plus the next job's first
// block requested by the planner measured 3 % below 2 ahead.
//
// Float caches spread each item's lines over the arithmetic of the block two ahead of it
// (SpreadPrefetch: one or two lines per pair of key dimensions, per value row), where the
// 32 prefetches of a part issued at once stalled the core whenever its miss buffers were
// full: a sixth of the kernel's time sat on the prefetch loop (perf annotate), the tile's
// FMAs waiting behind it. Measured on Zen 5 (2 threads, synth100m Q8_0, 32 sequences at
// contexts 128-160, bench_speed_report: sum over 32 steps of each step's fastest time, the
// two ways alternating run by run in one process): 11.09 -> 10.80, 13.71 -> 12.79, 12.46 ->
// 12.10, 12.07 -> 11.55 and 11.89 -> 11.50 ms per step (3-7 %); 3 or 4 items ahead within
// 1 % of 2. Prefill (512 tokens) and single-sequence decode unchanged within noise.
// Quantized caches still request whole parts (their tiles read a part's codes and scales in
// a different order).
constexpr int kPrefetchAhead = 2;

// The addresses of a job's shared blocks [first, end) of job.blocks, resolved once per job:
// KvStore::block_data is a virtual call (a paged store's also checks the index), and the
// passes and the prefetches asked for each block's address four times (7 % of a q8_0-cache
// job's samples in attention_bench's decode of one sequence). Contexts past kResolved blocks
// (2,048 positions of 16) keep the calls, which their arithmetic amortises.
class JobBlocks {
 public:
  static constexpr int kResolved = 128;
  JobBlocks(const AttentionJob& job, int first, int end) : job_(job), resolved_(end <= kResolved) {
    if (!resolved_) return;
    for (int b = first; b < end; ++b) address_[b] = job.kv->block_data(job.blocks[b]);
  }
  const uint8_t* operator()(int block) const {
    return resolved_ ? address_[block] : job_.kv->block_data(job_.blocks[block]);
  }

 private:
  const AttentionJob& job_;
  bool resolved_;
  const uint8_t* address_[kResolved];
};

struct KvPrefetch {
  const JobBlocks& address;
  size_t k_offset, v_offset, part_bytes;
  int first_block, blocks;  // the shared blocks [first_block, first_block + blocks)

  // Item i < blocks: K part of block first_block + i; then the V parts. Null past the end.
  const uint8_t* part(int i) const {
    if (i < 0 || i >= 2 * blocks) return nullptr;
    const bool value = i >= blocks;
    const int block = first_block + (value ? i - blocks : i);
    return address(block) + (value ? v_offset : k_offset);
  }
  // Item i spread over `steps` steps of a loop.
  SpreadPrefetch spread(int i, int steps) const {
    const uint8_t* p = part(i);
    return p != nullptr ? SpreadPrefetch(p, part_bytes, steps) : SpreadPrefetch();
  }
  void request(int i) const {
    const uint8_t* p = part(i);
    if (p == nullptr) return;
    for (size_t off = 0; off < part_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
    }
  }
};

// acc[j][c] += scores[j][start + slot] * V row `slot` (vectors c < NV of it from `dim`) for
// the `in_block` rows of one block. NV = CV (every vector whole, the usual head_dim) is
// compiled without the per-row vector checks; NV = 0 takes the count at run time.
template <typename S, int NQ, bool kF16, int CV, int NV>
inline void weigh_rows(const KvLayout& layout, const uint8_t* values, int dim, int in_block,
                       float* const* scores, int start, typename S::V (&acc)[NQ][CV],
                       const SpreadPrefetch& ahead, int n_vectors = NV) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  for (int slot = 0; slot < in_block; ++slot) {
    ahead.step(slot);
    V row[CV];
    if constexpr (NV == CV) {
      for (int c = 0; c < CV; ++c) {
        row[c] = load_cache<S, kF16>(values, layout.value_element(slot, dim + c * L), L);
      }
    } else {
      load_value_row<S, kF16, CV>(layout, values, slot, dim, n_vectors, row);
    }
    for (int j = 0; j < NQ; ++j) {
      const V p = S::set1(scores[j][start + slot]);
      for (int c = 0; c < CV; ++c) {
        if (NV == CV || c < n_vectors) acc[j][c] = S::fmadd(p, row[c], acc[j][c]);
      }
    }
  }
}

// Pass 3 for f16 / f32 caches: the probability-weighted sum of V rows, CV output vectors per
// query at a time; each V row is converted once for all queries of the job.
template <typename S, int NQ, bool kF16>
void weigh_float_values(const AttentionJob& job, const KvPrefetch& prefetch, int skip,
                        float* const* scores) {
  using V = typename S::V;
  constexpr int L = S::kLanes;
  constexpr int CV = S::value_vectors(NQ);
  const KvLayout& layout = job.kv->layout();
  const int d = layout.head_dim;
  const int block_size = layout.block_size;
  const int shared = job.shared_positions;
  const size_t v_offset = layout.offset(job.layer, true, job.kv_head);
  for (int dim = 0; dim < d; dim += CV * L) {
    const int n_vectors = std::min(CV, (d - dim) / L);
    V acc[NQ][CV];
    for (int j = 0; j < NQ; ++j) {
      for (int c = 0; c < CV; ++c) acc[j][c] = S::zero();
    }
    for (int start = skip; start < shared; start += block_size) {
      const int in_block = std::min(block_size, shared - start);
      // The first pass over the dimensions brings the V parts in (later ones find them in
      // cache), a block's rows spreading the lines of the part two blocks ahead.
      const SpreadPrefetch ahead =
          dim == 0 ? prefetch.spread(prefetch.blocks + (start - skip) / block_size + kPrefetchAhead,
                                     in_block)
                   : SpreadPrefetch();
      const uint8_t* values = prefetch.address(start / block_size) + v_offset;
      if (n_vectors == CV) {
        weigh_rows<S, NQ, kF16, CV, CV>(layout, values, dim, in_block, scores, start, acc, ahead);
      } else {
        weigh_rows<S, NQ, kF16, CV, 0>(layout, values, dim, in_block, scores, start, acc, ahead,
                                       n_vectors);
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
          load_value_row<S, kF16, CV1>(layout, values, slot, dim, n_vectors, row);
          for (int c = 0; c < CV1; ++c) {
            if (c < n_vectors) acc[c] = S::fmadd(p, row[c], acc[c]);
          }
        }
      }
      for (int c = 0; c < n_vectors; ++c) S::store(job.out[j] + dim + c * L, acc[c]);
    }
  }
}

// Pass 3 for q8_0 / q4_0 caches: integer P·V chunk by chunk (weigh_value_chunk), the shared
// positions' chunks once for all queries, then each query's own ones; every query's chunks
// are those of its positions whatever the job (batch invariance). A chunk that straddles
// the end of the shared positions goes to the queries' own pass (their block tables hold the
// shared blocks too); with a single sequence the shared positions are all of them, and a
// query's positions past its own end weigh 0.
template <typename S, int NQ, bool kQ4>
void weigh_quantized_values(const AttentionJob& job, const QuantGeometry& geo,
                            const KvPrefetch& prefetch, int skip, float* const* scores) {
  const KvLayout& layout = job.kv->layout();
  const int block_size = layout.block_size;
  const int shared = job.shared_positions;
  const size_t v_offset = layout.offset(job.layer, true, job.kv_head);
  for (int j = 0; j < NQ; ++j) std::fill(job.out[j], job.out[j] + layout.head_dim, 0.0f);
  int start = value_chunk_start(skip, block_size);
  while (start < shared) {
    const int end = value_chunk_end(start, block_size);
    if (end > shared && shared < job.max_positions) break;
    for (int b = start / block_size; b * block_size < std::min(end, shared); ++b) {
      prefetch.request(prefetch.blocks + b - prefetch.first_block + kPrefetchAhead);
    }
    const ValueChunk chunk(geo, block_size, prefetch.address, v_offset, start,
                           std::min(end, shared) - start);
    const float* p[NQ];
    for (int j = 0; j < NQ; ++j) p[j] = scores[j] + start;
    weigh_value_chunk<S, NQ, kQ4>(layout, geo, chunk, p, job.out);
    start = end;
  }
  for (int j = 0; j < NQ; ++j) {
    const int n = job.n_positions[j];
    for (int own = start; own < n;) {
      const int end = value_chunk_end(own, block_size);
      const auto own_block = [&](int b) { return job.kv->block_data(job.query_blocks[j][b]); };
      const ValueChunk chunk(geo, block_size, own_block, v_offset, own, std::min(end, n) - own);
      const float* p = scores[j] + own;
      weigh_value_chunk<S, 1, kQ4>(layout, geo, chunk, &p, &job.out[j]);
      own = end;
    }
  }
}

template <typename S, int NQ, KvType T>
void attend_job(const AttentionJob& job) {
  constexpr bool kF16 = T == KvType::kF16;
  constexpr bool kQuantized = kv_type_quantized(T);
  using V = typename S::V;
  constexpr int L = S::kLanes;
  const KvLayout& layout = job.kv->layout();
  const int d = layout.head_dim;
  const int block_size = layout.block_size;
  const int max_positions = job.max_positions;
  const size_t k_offset = layout.offset(job.layer, false, job.kv_head);
  const QuantGeometry geo(layout);

  alignas(64) float q[NQ][kMaxHeadDim];
  QuantizedQuery quantized[kQuantized ? NQ : 1];
  const QuantizedQuery* qq[NQ];
  float* scores[NQ];
  for (int j = 0; j < NQ; ++j) {
    if constexpr (kQuantized) {
      S::quantize_query(layout, job.q[j], quantized[j]);
      qq[j] = &quantized[j];
    }
    for (int i = 0; i < d; i += L) {
      const V row = S::load(job.q[j] + i);
      S::store(q[j] + i, kF16 ? S::round_f16(row) : row);
    }
    scores[j] = job.scores + job.scores_stride * j;
  }

  // 1. Scores, a tile of L positions at a time (float caches: two tiles per pass when the
  // job has few queries). Two accumulator chains per query (even and odd dimensions) hide
  // the FMA latency even when a job has a single query.
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
  // Every shared block any pass reads: pass 3's chunks of a quantized cache may start a block
  // before `skip`.
  const JobBlocks address(job, value_chunk_start(skip, block_size) / block_size,
                          (shared + block_size - 1) / block_size);
  const KvPrefetch prefetch{address,
                            k_offset,
                            layout.offset(job.layer, true, job.kv_head),
                            layout.part_bytes(),
                            skip / block_size,
                            (shared - skip + block_size - 1) / block_size};
  for (int i = 0; i < kPrefetchAhead; ++i) prefetch.request(i);
  KeyTile<NQ <= kPairedTileQueries ? 2 : 1> pending;
  for (int start = skip; start < shared; start += block_size) {
    const int item = (start - skip) / block_size + kPrefetchAhead;
    if constexpr (kQuantized) prefetch.request(item);
    const uint8_t* keys = address(start / block_size) + k_offset;
    const int in_block = std::min(block_size, shared - start);
    for (int slot = 0; slot < in_block; slot += L) {
      const int count = std::min(L, in_block - slot);
      if constexpr (kQuantized) {
        V acc[NQ];
        score_quantized_tile<S, NQ, T>(geo, keys, slot, count, qq, acc);
        for (int j = 0; j < NQ; ++j) S::store(scores[j] + start + slot, S::mul(acc[j], scale));
      } else if (pending.add(keys, slot, count, start + slot,
                             // the block's first tile carries the part two blocks ahead
                             slot == 0 ? prefetch.spread(item, d / 2) : SpreadPrefetch())) {
        score_float_tiles<S, NQ, kF16>(layout, pending, q, scale, scores);
      }
    }
  }
  if constexpr (!kQuantized) {
    if (pending.n > 0) score_float_tiles<S, NQ, kF16>(layout, pending, q, scale, scores);
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

  // 3. Weighted sum of V rows.
  if constexpr (kQuantized) {
    weigh_quantized_values<S, NQ, T == KvType::kQ4_0>(job, geo, prefetch, skip, scores);
  } else {
    weigh_float_values<S, NQ, kF16>(job, prefetch, skip, scores);
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

}  // namespace
}  // namespace rapide::attention_simd
