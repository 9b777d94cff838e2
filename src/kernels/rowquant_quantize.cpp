// Quantizers of the row-wise types, writing llama.cpp's block layouts.
//
// Q4_1, Q5_0 and Q5_1 are byte-exact with llama.cpp's reference quantizers
// (quantize_row_*_ref). For the k-quants and IQ4 types llama.cpp's reference quantizers
// search scales iteratively (make_qkx2_quants and kin). Q2_K, Q4_K and Q5_K search as its
// make_qkx2_quants does (ScaleSearch in rowquant.h); Q3_K, Q6_K and IQ4_XS use plain
// round-to-nearest: each 16- or 32-weight group gets its own scale (and min), the group
// scales are rounded to the super-block's integer levels, then every weight is rounded
// with its group's final scale. Files they write load in llama.cpp like any other. A
// super-block is planned (scales and codes in plain integers) and then packed: the seam a
// calibrated quantizer rounds through (kernels/superblock_plan.h).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/rowquant.h"
#include "kernels/superblock_plan.h"

namespace rapide::matmul {
namespace {

int nearest(float v) {
  return static_cast<int>(std::nearbyintf(v));
}

// make_qkx2_quants' parameters per type: the grid of inverse scales (levels + rmin +
// rdelta * i) / range for i in [0, steps], the error measure (absolute or squared) and
// whether each weight's importance gets the group's RMS added to its |x|.
struct Search {
  float rmin, rdelta;
  int steps;
  bool abs_error, rms_floor;
};

// One group's scale s and min m (weight = s * l - m, l in [0, levels]) by llama.cpp's
// make_qkx2_quants (see ScaleSearch); importance w.
void search_group(const float* x, const float* w, int n, int levels, const Search& sp, float& s,
                  float& m) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    s = 0.0f;
    m = -lo;
    return;
  }
  auto error = [&](float scale, float min, const int* l) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(l[i]) + min - x[i];
      e += w[i] * (sp.abs_error ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  auto round_levels = [&](float iscale, int* l) {
    for (int i = 0; i < n; ++i) l[i] = std::clamp(nearest(iscale * (x[i] - lo)), 0, levels);
  };
  int l[32];
  const float range = hi - lo;
  round_levels(static_cast<float>(levels) / range, l);
  float best_s = range / static_cast<float>(levels), best_min = lo;
  float best = error(best_s, best_min, l);
  for (int step = 0; step <= sp.steps; ++step) {
    round_levels(
        (sp.rmin + sp.rdelta * static_cast<float>(step) + static_cast<float>(levels)) / range, l);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float li = static_cast<float>(l[i]);
      sum_l += w[i] * li;
      sum_l2 += w[i] * li * li;
      sum_xl += w[i] * li * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.0f) continue;
    float scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (min > 0.0f) {  // the min must stay at or below 0: refit the scale alone
      min = 0.0f;
      scale = sum_xl / sum_l2;
    }
    const float e = error(scale, min, l);
    if (e < best) {
      best = e;
      best_s = scale;
      best_min = min;
    }
  }
  s = best_s;
  m = -best_min;
}

// Asymmetric groups: weight = d * ls * w - dmin * lm with w in [0, levels], ls and lm in
// [0, scale_max] (Q2_K, Q4_K, Q5_K). Each group's scale and min come from `search`, or
// without one from its range.
void plan_asymmetric(const float* x, int group, int levels, int scale_max, const Search* search,
                     SuperBlockPlan& p) {
  const int groups = 256 / group;
  float s[16], m[16], max_s = 0.0f, max_m = 0.0f;
  for (int g = 0; g < groups; ++g) {
    const float* xg = x + g * group;
    if (search != nullptr) {
      float rms = 0.0f;
      if (search->rms_floor) {
        for (int i = 0; i < group; ++i) rms += xg[i] * xg[i];
        rms = std::sqrt(rms / static_cast<float>(group));
      }
      float w[32];
      for (int i = 0; i < group; ++i) w[i] = rms + std::fabs(xg[i]);
      search_group(xg, w, group, levels, *search, s[g], m[g]);
    } else {
      float lo = 0.0f, hi = -FLT_MAX;
      for (int i = 0; i < group; ++i) {
        lo = std::min(lo, xg[i]);
        hi = std::max(hi, xg[i]);
      }
      s[g] = std::max(hi - lo, 0.0f) / static_cast<float>(levels);
      m[g] = -lo;
    }
    max_s = std::max(max_s, s[g]);
    max_m = std::max(max_m, m[g]);
  }
  p.d = fp32_to_fp16(max_s / static_cast<float>(scale_max));
  p.dmin = fp32_to_fp16(max_m / static_cast<float>(scale_max));
  const float d = fp16_to_fp32(p.d), dmin = fp16_to_fp32(p.dmin);
  for (int g = 0; g < groups; ++g) {
    const int ls = d > 0.0f ? std::clamp(nearest(s[g] / d), 0, scale_max) : 0;
    const int lm = dmin > 0.0f ? std::clamp(nearest(m[g] / dmin), 0, scale_max) : 0;
    const float step = d * static_cast<float>(ls), off = dmin * static_cast<float>(lm);
    for (int i = 0; i < group; ++i) {
      const int e = g * group + i;
      p.code[e] = step > 0.0f ? std::clamp(nearest((x[e] + off) / step), 0, levels) : 0;
    }
    for (int j = g * group / 16; j < (g + 1) * group / 16; ++j) {
      p.scale[j] = ls;
      p.min[j] = lm;
    }
  }
}

// Symmetric groups: weight = d * ls * value(w), ls in [-scale_limit, scale_limit - 1];
// `extreme` is the level the group's largest-magnitude weight maps to (-4 for Q3_K, -32
// for Q6_K, -127 for IQ4_XS's table), `quant` picks the level of x / step.
template <typename Quant>
void plan_symmetric(const float* x, int group, float extreme, int scale_limit, Quant quant,
                    SuperBlockPlan& p) {
  const int groups = 256 / group;
  float s[16], smax = 0.0f;
  for (int g = 0; g < groups; ++g) {
    float amax = 0.0f, mx = 0.0f;
    for (int i = 0; i < group; ++i) {
      if (std::fabs(x[g * group + i]) > amax) {
        amax = std::fabs(x[g * group + i]);
        mx = x[g * group + i];
      }
    }
    s[g] = mx / extreme;
    if (std::fabs(s[g]) > std::fabs(smax)) smax = s[g];
  }
  const float iscale = smax != 0.0f ? -static_cast<float>(scale_limit) / smax : 0.0f;
  p.d = fp32_to_fp16(iscale != 0.0f ? 1.0f / iscale : 0.0f);
  p.dmin = 0;
  const float d = fp16_to_fp32(p.d);
  for (int g = 0; g < groups; ++g) {
    const int ls = std::clamp(nearest(iscale * s[g]), -scale_limit, scale_limit - 1);
    const float step = d * static_cast<float>(ls);
    for (int i = 0; i < group; ++i) {
      p.code[g * group + i] = quant(step != 0.0f ? x[g * group + i] / step : 0.0f);
    }
    for (int j = g * group / 16; j < (g + 1) * group / 16; ++j) {
      p.scale[j] = ls;
      p.min[j] = 0;
    }
  }
}

// Index of the IQ4_NL level nearest v.
int iq4_index(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i) {
    if (std::fabs(kIq4nlValues[i] - v) < std::fabs(kIq4nlValues[best] - v)) best = i;
  }
  return best;
}

// The inverse of kquant_scale_min (quant_blocks.h).
void pack_scale_min(const SuperBlockPlan& p, uint8_t* q) {
  std::memset(q, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int sc = p.scale[2 * j], m = p.min[2 * j];
    if (j < 4) {
      q[j] |= static_cast<uint8_t>(sc & 63);
      q[j + 4] |= static_cast<uint8_t>(m & 63);
    } else {
      q[j + 4] = static_cast<uint8_t>((sc & 0xf) | ((m & 0xf) << 4));
      q[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      q[j] |= static_cast<uint8_t>((m >> 4) << 6);
    }
  }
}

// llama.cpp's make_qkx2_quants arguments in quantize_row_q2_K_ref / q4_K / q5_K.
constexpr Search kSearchQ2{-0.5f, 0.1f, 15, true, false};
constexpr Search kSearchQ4{-1.0f, 0.1f, 20, false, true};
constexpr Search kSearchQ5{-0.5f, 0.1f, 15, false, true};

int clamp_q3(float v) {
  return std::clamp(nearest(v), -4, 3);
}
int clamp_q6(float v) {
  return std::clamp(nearest(v), -32, 31);
}

void pack_q2_k(const SuperBlockPlan& p, BlockQ2K& b) {
  std::memset(&b, 0, sizeof(b));
  b.d = p.d;
  b.dmin = p.dmin;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(p.scale[j] | (p.min[j] << 4));
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = e % 128 / 32, l = e % 32;
    b.qs[32 * n + l] |= static_cast<uint8_t>(p.code[e] << (2 * k));
  }
}

void pack_q3_k(const SuperBlockPlan& p, BlockQ3K& b) {
  std::memset(&b, 0, sizeof(b));
  b.d = p.d;
  for (int j = 0; j < 16; ++j) {  // the inverse of q3k_scales
    const int v = p.scale[j] + 32;
    if (j < 8) {
      b.scales[j] |= static_cast<uint8_t>(v & 0xf);
    } else {
      b.scales[j - 8] |= static_cast<uint8_t>((v & 0xf) << 4);
    }
    b.scales[8 + j % 4] |= static_cast<uint8_t>((v >> 4) << (2 * (j / 4)));
  }
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = e % 128 / 32, l = e % 32, v = p.code[e] + 4;
    b.qs[32 * n + l] |= static_cast<uint8_t>((v & 3) << (2 * k));
    if (v >= 4) b.hmask[l] |= static_cast<uint8_t>(1 << (4 * n + k));
  }
}

void pack_q45_k(const SuperBlockPlan& p, bool five, uint8_t* out) {
  std::memcpy(out, &p.d, 2);
  std::memcpy(out + 2, &p.dmin, 2);
  pack_scale_min(p, out + 4);
  uint8_t* qh = five ? out + 16 : nullptr;
  uint8_t* qs = five ? out + 48 : out + 16;
  if (five) std::memset(qh, 0, 32);
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 32; ++l) {
      const int lo = p.code[64 * k + l], hi = p.code[64 * k + 32 + l];
      qs[32 * k + l] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
      if (five) qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * k)) | ((hi >> 4) << (2 * k + 1)));
    }
  }
}

void pack_q6_k(const SuperBlockPlan& p, BlockQ6K& b) {
  std::memset(&b, 0, sizeof(b));
  b.d = p.d;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(p.scale[j]);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = e % 128 / 32, l = e % 32, v = p.code[e] + 32;
    b.ql[64 * n + l + 32 * (k & 1)] |= static_cast<uint8_t>((v & 0xf) << (k < 2 ? 0 : 4));
    b.qh[32 * n + l] |= static_cast<uint8_t>((v >> 4) << (2 * k));
  }
}

void pack_iq4_xs(const SuperBlockPlan& p, BlockIq4Xs& b) {
  std::memset(&b, 0, sizeof(b));
  b.d = p.d;
  for (int ib = 0; ib < 8; ++ib) {
    const int v = p.scale[2 * ib] + 32;
    b.scales_l[ib / 2] |= static_cast<uint8_t>((v & 0xf) << (4 * (ib % 2)));
    b.scales_h |= static_cast<uint16_t>((v >> 4) << (2 * ib));
    for (int j = 0; j < 16; ++j) {
      b.qs[16 * ib + j] =
          static_cast<uint8_t>(p.code[32 * ib + j] | (p.code[32 * ib + 16 + j] << 4));
    }
  }
}

// Each packed block is built in an aligned local and copied out: rows need not be aligned.
template <typename Block, typename Pack>
void pack_via(const SuperBlockPlan& p, uint8_t* out, Pack pack) {
  Block b;
  pack(p, b);
  std::memcpy(out, &b, sizeof(b));
}

// 32-weight types. Q4_1 / Q5_0 / Q5_1 follow llama.cpp's reference quantizers exactly.
void quantize_q4_1(const float* x, BlockQ4_1& b) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = fp32_to_fp16(d);
  b.m = fp32_to_fp16(lo);
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
    const int q1 =
        std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  float amax = 0.0f, mx = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      mx = x[j];
    }
  }
  const float d = mx / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = fp32_to_fp16(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
    b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | ((q1 & 0xf) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}

void quantize_q5_1(const float* x, BlockQ5_1& b) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = fp32_to_fp16(d);
  b.m = fp32_to_fp16(lo);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
    const int q1 = static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f);
    b.qs[j] = static_cast<uint8_t>((q0 & 0xf) | ((q1 & 0xf) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}

void quantize_iq4_nl(const float* x, BlockIq4Nl& b) {
  float amax = 0.0f, mx = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      mx = x[j];
    }
  }
  b.d = fp32_to_fp16(mx / -127.0f);
  const float d = fp16_to_fp32(b.d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<uint8_t>(iq4_index(x[j] * id) | (iq4_index(x[j + 16] * id) << 4));
  }
}

}  // namespace

bool has_superblock_plan(TensorType type) {
  return is_row_type(type) && tensor_type_block_size(type) == kSuperBlock;
}

SuperBlockPlan plan_superblock(TensorType type, const float* x, ScaleSearch search) {
  SuperBlockPlan p;
  p.type = type;
  const bool s = search == ScaleSearch::kSearch;
  switch (type) {
    case TensorType::kQ2_K:
      plan_asymmetric(x, 16, 3, 15, s ? &kSearchQ2 : nullptr, p);
      break;
    case TensorType::kQ3_K:
      plan_symmetric(x, 16, -4.0f, 32, clamp_q3, p);
      break;
    case TensorType::kQ4_K:
      plan_asymmetric(x, 32, 15, 63, s ? &kSearchQ4 : nullptr, p);
      break;
    case TensorType::kQ5_K:
      plan_asymmetric(x, 32, 31, 63, s ? &kSearchQ5 : nullptr, p);
      break;
    case TensorType::kQ6_K:
      plan_symmetric(x, 16, -32.0f, 128, clamp_q6, p);
      break;
    case TensorType::kIQ4_XS:
      plan_symmetric(x, 32, -127.0f, 32, iq4_index, p);
      break;
    default:
      fail(ErrorCode::kUnsupported, "no super-block plan for tensor type {}",
           tensor_type_name(type));
  }
  return p;
}

float superblock_value(const SuperBlockPlan& p, int e, int code) {
  const int j = e / 16;
  const float step = fp16_to_fp32(p.d) * static_cast<float>(p.scale[j]);
  switch (p.type) {
    case TensorType::kQ2_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      return step * static_cast<float>(code) - fp16_to_fp32(p.dmin) * static_cast<float>(p.min[j]);
    case TensorType::kIQ4_XS:
      return step * static_cast<float>(kIq4nlValues[code]);
    default:
      return step * static_cast<float>(code);
  }
}

int superblock_nearest(const SuperBlockPlan& p, int e, float v) {
  const int j = e / 16;
  const float step = fp16_to_fp32(p.d) * static_cast<float>(p.scale[j]);
  int lo = 0, hi = 0;
  float off = 0.0f;  // what the min subtracts
  switch (p.type) {
    case TensorType::kQ2_K:
      hi = 3;
      off = fp16_to_fp32(p.dmin) * static_cast<float>(p.min[j]);
      break;
    case TensorType::kQ4_K:
      hi = 15;
      off = fp16_to_fp32(p.dmin) * static_cast<float>(p.min[j]);
      break;
    case TensorType::kQ5_K:
      hi = 31;
      off = fp16_to_fp32(p.dmin) * static_cast<float>(p.min[j]);
      break;
    case TensorType::kQ3_K:
      lo = -4;
      hi = 3;
      break;
    case TensorType::kQ6_K:
      lo = -32;
      hi = 31;
      break;
    case TensorType::kIQ4_XS: {  // a non-uniform table: the nearest of its 16 values
      int best = 0;
      for (int c = 1; c < 16; ++c) {
        if (std::fabs(superblock_value(p, e, c) - v) < std::fabs(superblock_value(p, e, best) - v))
          best = c;
      }
      return best;
    }
    default:
      fail(ErrorCode::kUnsupported, "no super-block plan for tensor type {}",
           tensor_type_name(p.type));
  }
  // On a uniform grid the nearest level is the rounded quotient, clamped (a negative step,
  // which Q3_K's signed group scales allow, only mirrors it).
  if (step == 0.0f) return std::clamp(0, lo, hi);
  return std::clamp(nearest((v + off) / step), lo, hi);
}

void pack_superblock(const SuperBlockPlan& p, uint8_t* out) {
  switch (p.type) {
    case TensorType::kQ2_K:
      pack_via<BlockQ2K>(p, out, pack_q2_k);
      break;
    case TensorType::kQ3_K:
      pack_via<BlockQ3K>(p, out, pack_q3_k);
      break;
    case TensorType::kQ4_K:
      pack_q45_k(p, false, out);
      break;
    case TensorType::kQ5_K:
      pack_q45_k(p, true, out);
      break;
    case TensorType::kQ6_K:
      pack_via<BlockQ6K>(p, out, pack_q6_k);
      break;
    case TensorType::kIQ4_XS:
      pack_via<BlockIq4Xs>(p, out, pack_iq4_xs);
      break;
    default:
      fail(ErrorCode::kUnsupported, "no super-block plan for tensor type {}",
           tensor_type_name(p.type));
  }
}

void quantize_row_blocks(TensorType type, const float* in, void* out, int64_t n,
                         ScaleSearch search) {
  auto* o = static_cast<uint8_t*>(out);
  const int64_t block = tensor_type_block_size(type);
  const int64_t bytes = tensor_type_block_bytes(type);
  for (int64_t b = 0; b < n / block; ++b) {
    const float* x = in + b * block;
    uint8_t* dst = o + b * bytes;
    // Each block is built in an aligned local and copied out: rows need not be aligned.
    switch (type) {
      case TensorType::kQ4_1: {
        BlockQ4_1 k;
        quantize_q4_1(x, k);
        std::memcpy(dst, &k, sizeof(k));
        break;
      }
      case TensorType::kQ5_0: {
        BlockQ5_0 k;
        quantize_q5_0(x, k);
        std::memcpy(dst, &k, sizeof(k));
        break;
      }
      case TensorType::kQ5_1: {
        BlockQ5_1 k;
        quantize_q5_1(x, k);
        std::memcpy(dst, &k, sizeof(k));
        break;
      }
      case TensorType::kIQ4_NL: {
        BlockIq4Nl k;
        quantize_iq4_nl(x, k);
        std::memcpy(dst, &k, sizeof(k));
        break;
      }
      case TensorType::kQ2_K:
      case TensorType::kQ3_K:
      case TensorType::kQ4_K:
      case TensorType::kQ5_K:
      case TensorType::kQ6_K:
      case TensorType::kIQ4_XS: {
        const SuperBlockPlan plan = plan_superblock(type, x, search);
        pack_superblock(plan, dst);
        break;
      }
      default:
        fail(ErrorCode::kUnsupported, "cannot quantize to tensor type {}", tensor_type_name(type));
    }
  }
}

}  // namespace rapide::matmul
