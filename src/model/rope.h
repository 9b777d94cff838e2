// Rotary position embedding angles, as llama.cpp's ggml_rope_cache_init computes them, for
// every variant a file can ask for: the plain base^(-2i/d) frequencies, linear position
// scaling, Llama 3's per-frequency divisors (rope_freqs.weight), LongRoPE's divisors (one of
// two sets, by the serving context), YaRN's NTK-by-parts blend with its magnitude correction,
// and partial rotary (only the first rot_dims of a head rotate).
//
// For pair i (dimensions 2i and 2i+1 in NORM layout, i and i + d/2 in NEOX) at position p:
//   theta_extrap = p * base^(-2i/rot_dims) / factor[i]       (factor 1 without a tensor)
//   theta_interp = freq_scale * theta_extrap                  (freq_scale = 1 / scaling factor)
//   YaRN: ramp = 1 - clamp((i - low) / max(0.001, high - low), 0, 1) * ext_factor, with
//         low/high the correction dimensions of beta_fast/beta_slow rotations at the
//         original context; theta = theta_interp (1 - ramp) + theta_extrap ramp, and the
//         magnitude mscale = attn_factor (1 + 0.1 ln(1 / freq_scale))
//   otherwise theta = theta_interp and mscale = attn_factor
//   cos = cos(theta) mscale, sin = sin(theta) mscale
// The power is taken by repeated multiplication (theta_scale^i), as ggml does, so angles
// match llama.cpp's bit for bit.
#pragma once

#include <vector>

#include "formats/model_config.h"

namespace rapide {

struct RopeParams {
  int rot_dims = 0;                // rotated dimensions per head (even)
  float base = 10000.0f;           // frequency base
  float freq_scale = 1.0f;         // 1 / linear (or YaRN) factor
  const float* factors = nullptr;  // rot_dims / 2 divisors, or null
  bool yarn = false;
  float ext_factor = 0.0f;   // YaRN's extrapolation mix (0: none)
  float attn_factor = 1.0f;  // magnitude of cos and sin
  float corr_low = 0.0f;     // YaRN correction dimensions (rope_yarn_corr_dims)
  float corr_high = 0.0f;
};

// The parameters of `c`'s global layers (local = false) or of its windowed layers with their
// own base (gemma3's local layers: rope_theta_local, never scaled). `factors` is the
// per-frequency divisor set the model chose (rope_freqs.weight or a LongRoPE set), or null.
RopeParams rope_params(const ModelConfig& c, bool local, const float* factors);

// cos and sin (rot_dims / 2 each) for one position.
void rope_angles(const RopeParams& p, int position, float* cos, float* sin);

// YaRN's correction dimension for `rotations` full turns over the original context
// (ggml_rope_yarn_corr_dim): the dimension whose wavelength fits that many times.
float yarn_corr_dim(int rot_dims, int orig_context, float rotations, float base);

}  // namespace rapide
