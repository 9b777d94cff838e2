#include "train/train_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace rapide::train {

void rms_norm_forward(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* y,
                      float* r) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    double sum = 0.0;
    for (int64_t d = 0; d < dim; ++d) sum += static_cast<double>(xi[d]) * xi[d];
    const float ri = 1.0f / std::sqrt(static_cast<float>(sum / dim) + eps);
    r[i] = ri;
    float* yi = y + i * dim;
    for (int64_t d = 0; d < dim; ++d) yi[d] = xi[d] * ri * w[d];
  }
}

// With y_d = x_d r w_d and r = (mean(x^2) + eps)^-1/2:
// dx_d = r dy_d w_d - x_d r^3 / dim * sum_e(dy_e w_e x_e).
void rms_norm_backward(const float* x, const float* w, const float* r, const float* dy, int64_t n,
                       int64_t dim, float* dx, float* dw, bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * dim;
    const float* dyi = dy + i * dim;
    float* dxi = dx + i * dim;
    const float ri = r[i];
    double dot = 0.0;
    for (int64_t d = 0; d < dim; ++d) {
      dot += static_cast<double>(dyi[d]) * w[d] * xi[d];
      dw[d] += dyi[d] * xi[d] * ri;
    }
    const float c = static_cast<float>(dot) * ri * ri * ri / static_cast<float>(dim);
    for (int64_t d = 0; d < dim; ++d) {
      const float g = ri * dyi[d] * w[d] - xi[d] * c;
      dxi[d] = accumulate ? dxi[d] + g : g;
    }
  }
}

RopeTable::RopeTable(int positions_, int head_dim, float theta, float scale, bool neox_)
    : positions(positions_), half(head_dim / 2), neox(neox_) {
  const size_t size = static_cast<size_t>(positions) * half;
  cos.resize(size);
  sin.resize(size);
  neg_sin.resize(size);
  const float theta_scale = std::pow(theta, -2.0f / static_cast<float>(head_dim));
  const float freq_scale = 1.0f / scale;
  for (int p = 0; p < positions; ++p) {
    float angle = static_cast<float>(p);
    for (int j = 0; j < half; ++j) {
      const size_t at = static_cast<size_t>(p) * half + j;
      cos[at] = std::cos(angle * freq_scale);
      sin[at] = std::sin(angle * freq_scale);
      neg_sin[at] = -sin[at];
      angle *= theta_scale;
    }
  }
}

void rope_apply(float* x, int64_t rows, int n_heads, int head_dim, const RopeTable& table,
                bool backward) {
  const int64_t width = static_cast<int64_t>(n_heads) * head_dim;
  for (int64_t i = 0; i < rows; ++i) {
    const size_t at = static_cast<size_t>(i % table.positions) * table.half;
    rope_rotate(x + i * width, n_heads, head_dim, table.cos.data() + at,
                (backward ? table.neg_sin : table.sin).data() + at, table.neox);
  }
}

namespace {
float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
}  // namespace

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       float* probs, float* out) {
  const int T = s.seq, hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t q_width = static_cast<int64_t>(s.heads) * hd;
  const int64_t kv_width = static_cast<int64_t>(s.kv_heads) * hd;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / group;
      float* P = probs + (static_cast<int64_t>(b) * s.heads + h) * T * T;
      for (int i = 0; i < T; ++i) {
        const float* qi = q + (static_cast<int64_t>(b) * T + i) * q_width + h * hd;
        float* row = P + static_cast<int64_t>(i) * T;
        float max_score = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const float* kj = k + (static_cast<int64_t>(b) * T + j) * kv_width + g * hd;
          row[j] = s.scale * dot(qi, kj, hd);
          max_score = std::max(max_score, row[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - max_score);
          sum += row[j];
        }
        float* oi = out + (static_cast<int64_t>(b) * T + i) * q_width + h * hd;
        std::fill(oi, oi + hd, 0.0f);
        for (int j = 0; j <= i; ++j) {
          row[j] /= sum;
          axpy(row[j], v + (static_cast<int64_t>(b) * T + j) * kv_width + g * hd, oi, hd);
        }
        std::fill(row + i + 1, row + T, 0.0f);
      }
    }
  }
}

// Per row i: dP_ij = dout_i . v_j, dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij');
// dq_i = scale sum_j dS_ij k_j, dk_j += scale dS_ij q_i, dv_j += P_ij dout_i.
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* probs, const float* dout, float* dq, float* dk, float* dv) {
  const int T = s.seq, hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t q_width = static_cast<int64_t>(s.heads) * hd;
  const int64_t kv_width = static_cast<int64_t>(s.kv_heads) * hd;
  std::fill(dq, dq + static_cast<int64_t>(s.batch) * T * q_width, 0.0f);
  std::fill(dk, dk + static_cast<int64_t>(s.batch) * T * kv_width, 0.0f);
  std::fill(dv, dv + static_cast<int64_t>(s.batch) * T * kv_width, 0.0f);
  std::vector<float> dS(static_cast<size_t>(T));
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / group;
      const float* P = probs + (static_cast<int64_t>(b) * s.heads + h) * T * T;
      for (int i = 0; i < T; ++i) {
        const int64_t qi_at = (static_cast<int64_t>(b) * T + i) * q_width + h * hd;
        const float* doi = dout + qi_at;
        const float* row = P + static_cast<int64_t>(i) * T;
        float weighted = 0.0f;
        for (int j = 0; j <= i; ++j) {
          const int64_t kj_at = (static_cast<int64_t>(b) * T + j) * kv_width + g * hd;
          dS[j] = dot(doi, v + kj_at, hd);
          weighted += row[j] * dS[j];
          axpy(row[j], doi, dv + kj_at, hd);
        }
        for (int j = 0; j <= i; ++j) {
          const int64_t kj_at = (static_cast<int64_t>(b) * T + j) * kv_width + g * hd;
          const float ds = row[j] * (dS[j] - weighted) * s.scale;
          axpy(ds, k + kj_at, dq + qi_at, hd);
          axpy(ds, q + qi_at, dk + kj_at, hd);
        }
      }
    }
  }
}

void swiglu_forward(const float* g, const float* u, int64_t n, float* h) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

// silu(g) = g s(g), silu'(g) = s(g) (1 + g (1 - s(g))).
void swiglu_backward(const float* g, const float* u, const float* dh, int64_t n, float* dg,
                     float* du) {
  for (int64_t i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-g[i]));
    du[i] = dh[i] * g[i] * sig;
    dg[i] = dh[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
  }
}

}  // namespace rapide::train
