#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace rapide {

float yarn_corr_dim(int rot_dims, int orig_context, float rotations, float base) {
  return static_cast<float>(rot_dims) *
         std::log(static_cast<float>(orig_context) /
                  (rotations * 2.0f * static_cast<float>(std::numbers::pi))) /
         (2.0f * std::log(base));
}

RopeParams rope_params(const ModelConfig& c, bool local, const float* factors) {
  RopeParams p;
  p.rot_dims = c.rotary_dims();
  p.factors = factors;
  if (local) {
    p.base = c.rope_theta_local;  // unscaled, no factors (gemma3's local layers)
    p.factors = nullptr;
    return p;
  }
  p.base = c.rope_theta;
  p.freq_scale = 1.0f / c.rope_scale;
  p.attn_factor = c.yarn_attn_factor;
  if (c.rope_scaling == RopeScaling::kYarn) {
    p.yarn = true;
    p.ext_factor = c.yarn_ext_factor;
    const float low =
        std::floor(yarn_corr_dim(p.rot_dims, c.rope_orig_context, c.yarn_beta_fast, p.base));
    const float high =
        std::ceil(yarn_corr_dim(p.rot_dims, c.rope_orig_context, c.yarn_beta_slow, p.base));
    p.corr_low = std::max(0.0f, low);
    p.corr_high = std::min(static_cast<float>(p.rot_dims - 1), high);
  }
  return p;
}

void rope_angles(const RopeParams& p, int position, float* cos, float* sin) {
  const int half = p.rot_dims / 2;
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(p.rot_dims));
  float mscale = p.attn_factor;
  if (p.yarn && p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  float theta = static_cast<float>(position);
  for (int i = 0; i < half; ++i) {
    const float extrap = p.factors != nullptr ? theta / p.factors[i] : theta;
    float angle = extrap * p.freq_scale;
    if (p.yarn && p.ext_factor != 0.0f) {
      const float y =
          (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      angle = angle * (1.0f - mix) + extrap * mix;
    }
    cos[i] = std::cos(angle) * mscale;
    sin[i] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

}  // namespace rapide
