#include "train/pruning.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "base/error.h"

namespace rapide::train {

namespace {

std::string layer_tensor(int layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

// The indices of the `keep` highest scores, ascending (ties keep the lower index).
std::vector<int> best(const std::vector<double>& scores, int keep) {
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

// sum over rows r of |a[r][c] * b[r][c]| (b == nullptr: a[r][c]^2), per column c.
std::vector<double> column_sums(const float* a, const float* b, int64_t rows, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double x = a[r * cols + c];
      out[c] += b == nullptr ? x * x : std::abs(x * b[r * cols + c]);
    }
  }
  return out;
}

// sum over each row of |a * b|.
std::vector<double> row_sums(const float* a, const float* b, int64_t rows, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r] += std::abs(a[r * cols + c] * b[r * cols + c]);
  }
  return out;
}

}  // namespace

void ActivationNorms::observe(int layer, LinearInput input, const float* x, int64_t n,
                              int64_t cols) {
  if (layer < 0 || layer >= static_cast<int>(attn_out_.size())) return;
  quant::InputStats* stats = input == LinearInput::kAttnOut   ? &attn_out_[layer]
                             : input == LinearInput::kFfnDown ? &ffn_down_[layer]
                                                              : nullptr;
  if (stats == nullptr) return;
  stats->cols = cols;
  stats->add(x, n, false);
}

StructureScores magnitude_scores(const TrainModel& model, const ActivationNorms& norms) {
  const TrainShape& s = model.shape();
  StructureScores scores;
  for (int l = 0; l < s.layers; ++l) {
    // FFN channel j: ||x_j|| * ||W_down[:, j]||.
    const quant::InputStats& down_in = norms.ffn_down(l);
    if (down_in.cols != s.ffn) {
      fail(ErrorCode::kInvalidArgument, "no calibration activations were observed for layer {}", l);
    }
    const std::vector<double> down =
        column_sums(model.data(layer_tensor(l, "ffn_down.weight")), nullptr, s.dim, s.ffn);
    std::vector<double> ffn(static_cast<size_t>(s.ffn));
    for (int j = 0; j < s.ffn; ++j) ffn[j] = std::sqrt(down_in.sum_sq[j] * down[j]);
    scores.ffn.push_back(std::move(ffn));
    // KV group g: the channels of its query heads in the attention output and W_o.
    const quant::InputStats& att_in = norms.attn_out(l);
    const std::vector<double> wo =
        column_sums(model.data(layer_tensor(l, "attn_output.weight")), nullptr, s.dim, s.q_dim());
    const int64_t group_width = s.q_dim() / s.kv_heads;
    std::vector<double> groups(static_cast<size_t>(s.kv_heads), 0.0);
    for (int64_t c = 0; c < s.q_dim(); ++c) {
      groups[c / group_width] += std::sqrt(att_in.sum_sq[c] * wo[c]);
    }
    scores.kv_groups.push_back(std::move(groups));
  }
  return scores;
}

StructureScores taylor_scores(const TrainModel& model) {
  const TrainShape& s = model.shape();
  StructureScores scores;
  auto rows = [&](int l, const char* what, int64_t n_rows, int64_t cols) {
    const std::string name = layer_tensor(l, what);
    return row_sums(model.data(name), model.grad(name), n_rows, cols);
  };
  auto columns = [&](int l, const char* what, int64_t n_rows, int64_t cols) {
    const std::string name = layer_tensor(l, what);
    return column_sums(model.data(name), model.grad(name), n_rows, cols);
  };
  for (int l = 0; l < s.layers; ++l) {
    const std::vector<double> gate = rows(l, "ffn_gate.weight", s.ffn, s.dim);
    const std::vector<double> up = rows(l, "ffn_up.weight", s.ffn, s.dim);
    const std::vector<double> down = columns(l, "ffn_down.weight", s.dim, s.ffn);
    std::vector<double> ffn(static_cast<size_t>(s.ffn));
    for (int j = 0; j < s.ffn; ++j) ffn[j] = gate[j] + up[j] + down[j];
    scores.ffn.push_back(std::move(ffn));

    const std::vector<double> q = rows(l, "attn_q.weight", s.q_dim(), s.dim);
    const std::vector<double> k = rows(l, "attn_k.weight", s.kv_dim(), s.dim);
    const std::vector<double> v = rows(l, "attn_v.weight", s.kv_dim(), s.dim);
    const std::vector<double> o = columns(l, "attn_output.weight", s.dim, s.q_dim());
    const int64_t group_width = s.q_dim() / s.kv_heads;
    std::vector<double> groups(static_cast<size_t>(s.kv_heads), 0.0);
    for (int64_t c = 0; c < s.q_dim(); ++c) groups[c / group_width] += q[c] + o[c];
    for (int64_t c = 0; c < s.kv_dim(); ++c) groups[c / s.head_dim] += k[c] + v[c];
    scores.kv_groups.push_back(std::move(groups));
  }
  return scores;
}

void add_block_influence(const TrainModel& model, int64_t tokens, std::vector<double>& influence) {
  const TrainShape& s = model.shape();
  influence.resize(static_cast<size_t>(s.layers), 0.0);
  for (int l = 0; l < s.layers; ++l) {
    const float* in = model.residual(l);
    const float* out = model.residual(l + 1);
    for (int64_t t = 0; t < tokens; ++t) {
      double dot = 0.0, a = 0.0, b = 0.0;
      for (int d = 0; d < s.dim; ++d) {
        const double x = in[t * s.dim + d], y = out[t * s.dim + d];
        dot += x * y;
        a += x * x;
        b += y * y;
      }
      influence[l] += 1.0 - dot / std::max(1e-30, std::sqrt(a * b));
    }
  }
}

PrunePlan plan_pruning(const TrainShape& s, const StructureScores& scores, const PruneOptions& o) {
  if (o.ffn < 0.0 || o.ffn >= 1.0 || o.heads < 0.0 || o.heads >= 1.0) {
    fail(ErrorCode::kInvalidArgument,
         "--ffn and --heads are fractions to remove, in [0, 1) (got {} and {})", o.ffn, o.heads);
  }
  if (o.layers < 0 || o.layers >= s.layers) {
    fail(ErrorCode::kInvalidArgument,
         "--layers {}: the model has {} layers, at least one must stay", o.layers, s.layers);
  }
  if (o.multiple_of < 1) fail(ErrorCode::kInvalidArgument, "--multiple-of must be positive");
  PrunePlan plan;
  plan.keep_layers =
      best(scores.layers.empty() ? std::vector<double>(s.layers, 0.0) : scores.layers,
           s.layers - o.layers);
  int keep_ffn = static_cast<int>(std::lround(s.ffn * (1.0 - o.ffn)));
  if (o.ffn > 0.0 && s.ffn % o.multiple_of == 0) {
    keep_ffn =
        std::max(o.multiple_of,
                 static_cast<int>(std::lround(static_cast<double>(keep_ffn) / o.multiple_of)) *
                     o.multiple_of);
  }
  keep_ffn = std::clamp(keep_ffn, 1, s.ffn);
  const int keep_groups =
      std::max(1, s.kv_heads - static_cast<int>(std::lround(o.heads * s.kv_heads)));
  for (int l : plan.keep_layers) {
    plan.keep_ffn.push_back(best(scores.ffn[l], keep_ffn));
    plan.keep_kv_groups.push_back(best(scores.kv_groups[l], keep_groups));
  }
  return plan;
}

TrainModel apply_pruning(const TrainModel& model, const PrunePlan& plan) {
  const TrainShape& s = model.shape();
  const int group = s.heads / s.kv_heads;
  TrainShape pruned = s;
  pruned.layers = static_cast<int>(plan.keep_layers.size());
  pruned.ffn = static_cast<int>(plan.keep_ffn.front().size());
  pruned.kv_heads = static_cast<int>(plan.keep_kv_groups.front().size());
  pruned.heads = pruned.kv_heads * group;
  TrainModel out(pruned);
  auto copy = [&](const std::string& name) {
    const ParamTensor& t = model.tensor(name);
    std::copy_n(model.data(name), t.size, out.data(name));
  };
  // Rows (or, with by_column, columns) of a matrix of `cols` columns whose index is in `keep`
  // blocks of `block` rows.
  auto select = [&](const std::string& from, const std::string& to, const std::vector<int>& keep,
                    int block, bool by_column) {
    const ParamTensor& t = model.tensor(from);
    const int64_t cols = t.shape[0], rows = t.size / cols;
    const float* src = model.data(from);
    float* dst = out.data(to);
    if (by_column) {
      const int64_t new_cols = static_cast<int64_t>(keep.size()) * block;
      for (int64_t r = 0; r < rows; ++r) {
        for (size_t i = 0; i < keep.size(); ++i) {
          std::copy_n(src + r * cols + static_cast<int64_t>(keep[i]) * block, block,
                      dst + r * new_cols + static_cast<int64_t>(i) * block);
        }
      }
    } else {
      for (size_t i = 0; i < keep.size(); ++i) {
        std::copy_n(src + static_cast<int64_t>(keep[i]) * block * cols, block * cols,
                    dst + static_cast<int64_t>(i) * block * cols);
      }
    }
  };
  copy("token_embd.weight");
  copy("output_norm.weight");
  if (!s.tied) copy("output.weight");
  for (size_t i = 0; i < plan.keep_layers.size(); ++i) {
    const int l = plan.keep_layers[i];
    const int n = static_cast<int>(i);
    auto from = [&](const char* what) { return layer_tensor(l, what); };
    auto to = [&](const char* what) { return layer_tensor(n, what); };
    std::copy_n(model.data(from("attn_norm.weight")), s.dim, out.data(to("attn_norm.weight")));
    std::copy_n(model.data(from("ffn_norm.weight")), s.dim, out.data(to("ffn_norm.weight")));
    const std::vector<int>& groups = plan.keep_kv_groups[i];
    select(from("attn_q.weight"), to("attn_q.weight"), groups, group * s.head_dim, false);
    select(from("attn_k.weight"), to("attn_k.weight"), groups, s.head_dim, false);
    select(from("attn_v.weight"), to("attn_v.weight"), groups, s.head_dim, false);
    select(from("attn_output.weight"), to("attn_output.weight"), groups, group * s.head_dim, true);
    const std::vector<int>& channels = plan.keep_ffn[i];
    select(from("ffn_gate.weight"), to("ffn_gate.weight"), channels, 1, false);
    select(from("ffn_up.weight"), to("ffn_up.weight"), channels, 1, false);
    select(from("ffn_down.weight"), to("ffn_down.weight"), channels, 1, true);
  }
  return out;
}

}  // namespace rapide::train
