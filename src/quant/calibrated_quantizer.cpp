#include "quant/calibrated_quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/matmul.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "quant/block_grid.h"
#include "quant/channel_scales.h"
#include "quant/gptq.h"
#include "quant/input_stats.h"
#include "quant/matrix_quant.h"

namespace rapide::quant {
namespace {

constexpr LinearInput kInputs[] = {LinearInput::kAttnIn, LinearInput::kAttnOut, LinearInput::kFfnIn,
                                   LinearInput::kFfnDown};

// Keeps the statistics of one layer's inputs (or the head's, layer -1).
class StatsCollector final : public LinearObserver {
 public:
  StatsCollector(int layer, bool with_hessian) : layer_(layer), with_hessian_(with_hessian) {}
  void observe(int layer, LinearInput input, const float* x, int64_t n, int64_t cols) override {
    if (layer != layer_) return;
    InputStats& s = stats[input];
    s.cols = cols;
    s.add(x, n, with_hessian_);
  }
  std::map<LinearInput, InputStats> stats;

 private:
  int layer_;
  bool with_hessian_;
};

// One calibration pass: every chunk of tokens through the model, observing `layer`.
std::map<LinearInput, InputStats> collect(Model& model, const CalibrationOptions& o, int layer,
                                          bool with_hessian, ThreadPool& pool) {
  StatsCollector collector(layer, with_hessian);
  model.set_linear_observer(&collector);
  const int n = static_cast<int>(o.tokens.size());
  const int chunk = std::min(o.chunk, model.config().max_context);
  ContiguousKvStore kv(model.config(), 1, chunk);
  Batch batch;
  for (int begin = 0; begin < n; begin += chunk) {
    batch.clear();
    for (int p = 0; p < chunk && begin + p < n; ++p) {
      batch.add(o.tokens[begin + p], 0, p, /*logits=*/layer < 0);  // the head's input only
    }
    model.forward(batch, kv, pool);
  }
  model.set_linear_observer(nullptr);
  return std::move(collector.stats);
}

// Statistics stood in for by an importance matrix entry: mean x^2 only (|x| and max |x|
// approximated by its square root, the channels taken as uncorrelated).
InputStats stats_from_imatrix(const ImatrixEntry& e) {
  InputStats s;
  s.cols = static_cast<int64_t>(e.values.size());
  s.tokens = 1;
  s.calls = e.ncall;
  const std::vector<float> sq = e.mean_sq();
  for (float v : sq) {
    s.sum_sq.push_back(v);
    s.sum_abs.push_back(std::sqrt(std::max(v, 0.0f)));
    s.max_abs.push_back(std::sqrt(std::max(v, 0.0f)));
  }
  return s;
}

std::string layer_name(int layer, const char* role) {
  return fmt::format("blk.{}.{}.weight", layer, role);
}

std::vector<float> read_vector(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.element_count()));
  dequantize_row(v.type, v.data, out.data(), v.element_count());
  return out;
}

// What one group of matrices reading the same input goes through.
struct Group {
  Group(LinearInput in, std::vector<FloatMatrix*> ms) : input(in), matrices(std::move(ms)) {}
  LinearInput input;
  std::vector<FloatMatrix*> matrices;
  InputStats stats;
  bool has_stats = false;
  std::vector<float> importance;  // mean x^2 of the (scaled) input: weighted rounding

  bool all_float() const {
    return std::all_of(matrices.begin(), matrices.end(),
                       [](const FloatMatrix* m) { return is_float_type(m->type); });
  }
  // The matrices become W diag(s) and their input x / s: the statistics follow.
  void fold(const std::vector<float>& s) {
    for (FloatMatrix* m : matrices) scale_columns(*m, s);
    if (has_stats) stats.divide_channels(s);
    for (size_t c = 0; c < importance.size(); ++c) importance[c] /= s[c] * s[c];
  }
};

class Calibrator {
 public:
  Calibrator(std::shared_ptr<const ModelFile> file, const QuantPlan& plan,
             const QuantModelFacts& facts, const CalibrationOptions& o, ThreadPool& pool)
      : file_(*file), plan_(plan), facts_(facts), o_(o), pool_(pool) {
    const ModelConfig& c = file_.config;
    if (c.fused_qkv || c.fused_gate_up || c.n_experts > 0) {
      fail(ErrorCode::kUnsupported,
           "calibrated quantization supports dense Llama-family layers with separate q/k/v "
           "and gate/up matrices ({} has fused or expert layers)",
           file_.path);
    }
    if (!o.tokens.empty()) model_ = std::make_unique<Model>(std::move(file));
  }

  CalibrationResult run() {
    const int layers = file_.config.n_layers;
    for (int l = 0; l < layers; ++l) {
      if (o_.progress) o_.progress(fmt::format("blk.{}", l), l, layers + 1);
      run_layer(l);
    }
    if (o_.progress) o_.progress("output", layers, layers + 1);
    run_head();
    if (o_.progress) o_.progress("done", layers + 1, layers + 1);
    result_.imatrix.dataset = o_.dataset;
    return std::move(result_);
  }

 private:
  FloatMatrix load(const std::string& name, int layer) {
    const TensorView& v = file_.get(name);
    FloatMatrix m;
    m.name = name;
    m.cols = v.row_length();
    m.rows = v.rows();
    m.type = choose_tensor_type(name, v.shape, layer, plan_, facts_);
    m.w.resize(static_cast<size_t>(m.rows * m.cols));
    const int64_t row_bytes = tensor_row_bytes(v.type, m.cols);
    for (int64_t r = 0; r < m.rows; ++r) {
      dequantize_row(v.type, v.data + r * row_bytes, m.w.data() + r * m.cols, m.cols);
    }
    return m;
  }

  bool needs_hessian() const { return o_.method != CalibrationMethod::kRtn; }
  // AWQ's channel scales are searched and folded: --method awq, and gptq, which then
  // quantizes the scaled matrices with the Hessians of the scaled inputs.
  bool scales_channels() const {
    return o_.method == CalibrationMethod::kAwq ||
           (o_.method == CalibrationMethod::kGptq && o_.awq_before_gptq);
  }

  // The group's statistics: from this pass's collection, else from --imatrix.
  void attach_stats(Group& g, std::map<LinearInput, InputStats>& collected) {
    const int64_t cols = g.matrices[0]->cols;
    auto it = collected.find(g.input);
    if (it != collected.end()) {
      g.stats = std::move(it->second);
      g.has_stats = true;
      ImatrixEntry e;
      e.ncall = static_cast<int32_t>(g.stats.calls);
      e.values = g.stats.mean_sq();
      for (float& v : e.values) v *= static_cast<float>(e.ncall);
      for (const FloatMatrix* m : g.matrices) {
        e.name = m->name;
        result_.imatrix.entries.push_back(e);
      }
      result_.imatrix.last_call = static_cast<int32_t>(g.stats.calls);
    }
    if (scales_channels() && g.has_stats) {
      // AWQ rounds on the scale whose error, weighted by each channel's activation energy,
      // is least (the per-block form of AWQ's clipping search).
      g.importance = g.stats.mean_sq();
    }
    if (o_.imatrix != nullptr) {
      const ImatrixEntry* e = o_.imatrix->find(g.matrices[0]->name);
      if (e != nullptr && static_cast<int64_t>(e->values.size()) == cols) {
        g.importance = e->mean_sq();
        if (!g.has_stats) {
          g.stats = stats_from_imatrix(*e);
          g.has_stats = true;
        }
      }
    }
  }

  void smooth(Group& g, std::vector<float>& norm) {
    if (o_.smooth_alpha < 0.0f || !g.has_stats || g.all_float()) return;
    const std::vector<float> s =
        smooth_scales(std::vector<const FloatMatrix*>(g.matrices.begin(), g.matrices.end()),
                      g.stats.max_abs, o_.smooth_alpha);
    g.fold(s);
    divide_by(norm.data(), s, static_cast<int64_t>(norm.size()));
    note(g, fmt::format("smoothquant alpha {:.2f}", o_.smooth_alpha));
  }

  // The AWQ scales of a group (empty when the group is not searched). `tie` (channel ->
  // class) makes channels of one class share a scale: their mean |x| is averaged.
  std::vector<float> awq(Group& g, const std::vector<int64_t>& tie = {}) {
    if (!scales_channels() || !g.has_stats || g.all_float()) return {};
    std::vector<float> mag = g.stats.mean_abs();
    if (!tie.empty()) {
      std::map<int64_t, std::pair<float, int>> sums;
      for (size_t c = 0; c < mag.size(); ++c) {
        sums[tie[c]].first += mag[c];
        ++sums[tie[c]].second;
      }
      for (size_t c = 0; c < mag.size(); ++c) {
        mag[c] = sums[tie[c]].first / static_cast<float>(sums[tie[c]].second);
      }
    }
    const AwqResult r = search_awq_scales(
        std::vector<const FloatMatrix*>(g.matrices.begin(), g.matrices.end()), mag,
        g.stats.mean_hessian(), g.importance.empty() ? nullptr : g.importance.data());
    note(g, fmt::format("awq alpha {:.2f}, output error {:.3g} -> {:.3g}", r.alpha, r.rtn_error,
                        r.error));
    return r.scales;
  }

  void quantize(Group& g) {
    for (FloatMatrix* m : g.matrices) {
      ReplacedTensor& out = result_.tensors[m->name];
      out.type = m->type;
      if (o_.keep_float) {
        out.type = TensorType::kF32;
        out.data.resize(m->w.size() * sizeof(float));
        std::memcpy(out.data.data(), m->w.data(), out.data.size());
        continue;
      }
      if (o_.method == CalibrationMethod::kGptq && g.has_stats && gptq_supports(m->type)) {
        out.data = gptq_quantize(m->type, m->w.data(), m->rows, m->cols, g.stats.mean_hessian());
        continue;
      }
      if (o_.method == CalibrationMethod::kGptq && !gptq_supports(m->type) && g.has_stats &&
          !g.all_float()) {
        note(g, fmt::format("{}: gptq does not support {}, round-to-nearest", m->name,
                            tensor_type_name(m->type)));
      }
      out.data = quantize_matrix(m->type, m->w.data(), m->rows, m->cols,
                                 g.importance.empty() ? nullptr : g.importance.data());
    }
  }

  void replace_vector(const std::string& name, const std::vector<float>& v) {
    const TensorView& view = file_.get(name);
    ReplacedTensor& out = result_.tensors[name];
    out.type = view.type;
    out.data.resize(view.size_bytes);
    quantize_row(view.type, v.data(), out.data.data(), static_cast<int64_t>(v.size()));
  }

  void note(const Group& g, const std::string& what) {
    result_.notes.push_back(g.matrices[0]->name + ": " + what);
  }

  void run_layer(int l) {
    const ModelConfig& c = file_.config;
    std::map<LinearInput, InputStats> collected;
    if (model_) collected = collect(*model_, o_, l, needs_hessian(), pool_);
    FloatMatrix q = load(layer_name(l, "attn_q"), l), k = load(layer_name(l, "attn_k"), l),
                v = load(layer_name(l, "attn_v"), l), o = load(layer_name(l, "attn_output"), l),
                gate = load(layer_name(l, "ffn_gate"), l), up = load(layer_name(l, "ffn_up"), l),
                down = load(layer_name(l, "ffn_down"), l);
    std::vector<float> attn_norm = read_vector(file_.get(layer_name(l, "attn_norm")));
    std::vector<float> ffn_norm = read_vector(file_.get(layer_name(l, "ffn_norm")));
    Group attn_in{LinearInput::kAttnIn, {&q, &k, &v}}, attn_out{LinearInput::kAttnOut, {&o}},
        ffn_in{LinearInput::kFfnIn, {&gate, &up}}, ffn_down{LinearInput::kFfnDown, {&down}};
    for (Group* g : {&attn_in, &attn_out, &ffn_in, &ffn_down}) attach_stats(*g, collected);
    // The norm-fed inputs take SmoothQuant's scales (the activations with outliers).
    smooth(attn_in, attn_norm);
    smooth(ffn_in, ffn_norm);
    // AWQ: every scale is searched on the weights as they are now, then folded. Row
    // scalings (o's into v's rows, down's into up's) commute with the column ones.
    const std::vector<float> s_attn_in = awq(attn_in), s_ffn_in = awq(ffn_in);
    const std::vector<float> s_down = awq(ffn_down);
    // o's input channel h * head_dim + d is a mix of v's output kv(h) * head_dim + d, where
    // q head h reads kv head h / (n_heads / n_kv_heads): those channels share a scale.
    std::vector<int64_t> value_row(static_cast<size_t>(c.q_dim()));
    const int group = c.n_heads / c.n_kv_heads;
    for (int64_t j = 0; j < c.q_dim(); ++j) {
      value_row[j] = (j / c.head_dim / group) * c.head_dim + j % c.head_dim;
    }
    const std::vector<float> s_out = c.qkv_bias ? std::vector<float>{} : awq(attn_out, value_row);
    if (!s_out.empty()) {
      for (int64_t j = 0; j < c.q_dim(); ++j) {
        float* row = v.w.data() + value_row[j] * v.cols;
        if (j % (static_cast<int64_t>(group) * c.head_dim) < c.head_dim) {  // once per row
          for (int64_t col = 0; col < v.cols; ++col) row[col] /= s_out[j];
        }
      }
      attn_out.fold(s_out);
    }
    if (!s_down.empty()) {
      for (int64_t r = 0; r < up.rows; ++r) {
        for (int64_t col = 0; col < up.cols; ++col) up.w[r * up.cols + col] /= s_down[r];
      }
      ffn_down.fold(s_down);
    }
    if (!s_attn_in.empty()) {
      attn_in.fold(s_attn_in);
      divide_by(attn_norm.data(), s_attn_in, c.dim);
    }
    if (!s_ffn_in.empty()) {
      ffn_in.fold(s_ffn_in);
      divide_by(ffn_norm.data(), s_ffn_in, c.dim);
    }
    for (Group* g : {&attn_in, &attn_out, &ffn_in, &ffn_down}) quantize(*g);
    if (o_.smooth_alpha >= 0.0f || scales_channels()) {
      replace_vector(layer_name(l, "attn_norm"), attn_norm);
      replace_vector(layer_name(l, "ffn_norm"), ffn_norm);
    }
  }

  void run_head() {
    const bool untied = file_.find("output.weight") != nullptr;
    const std::string name = untied ? "output.weight" : "token_embd.weight";
    std::map<LinearInput, InputStats> collected;
    if (model_) {
      collected = collect(*model_, o_, -1, needs_hessian(), pool_);
      collected[LinearInput::kAttnIn] = std::move(collected[LinearInput::kOutput]);
      collected.erase(LinearInput::kOutput);
    }
    FloatMatrix head = load(name, -1);
    Group g{LinearInput::kAttnIn, {&head}};
    attach_stats(g, collected);
    std::vector<float> s;
    if (untied) s = awq(g);
    if (!s.empty()) {
      std::vector<float> norm = read_vector(file_.get("output_norm.weight"));
      g.fold(s);
      divide_by(norm.data(), s, static_cast<int64_t>(norm.size()));
      replace_vector("output_norm.weight", norm);
    } else if (scales_channels() && g.has_stats) {
      // Tied to the embeddings, the head's columns cannot be scaled: only its rounding is
      // weighted by the calibration's activations.
      note(g, "awq: tied head, no channel scales");
    }
    quantize(g);
  }

  const ModelFile& file_;
  QuantPlan plan_;
  QuantModelFacts facts_;
  const CalibrationOptions& o_;
  ThreadPool& pool_;
  std::unique_ptr<Model> model_;
  CalibrationResult result_;
};

}  // namespace

int layer_of(const std::string& name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
    layer = layer * 10 + (name[i] - '0');
  return layer;
}

CalibrationResult calibrate(std::shared_ptr<const ModelFile> file, const QuantPlan& plan,
                            const QuantModelFacts& facts, const CalibrationOptions& options,
                            ThreadPool& pool) {
  if (options.tokens.empty() && options.imatrix == nullptr &&
      (options.method != CalibrationMethod::kRtn || options.smooth_alpha >= 0.0f)) {
    fail(ErrorCode::kInvalidArgument,
         "this method needs calibration statistics: give --calibration TEXT_FILE (or --imatrix "
         "FILE for awq / smooth)");
  }
  if (options.method == CalibrationMethod::kGptq && options.tokens.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--method gptq needs --calibration TEXT_FILE (an imatrix holds no Hessian)");
  }
  return Calibrator(std::move(file), plan, facts, options, pool).run();
}

}  // namespace rapide::quant
